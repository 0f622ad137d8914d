"""Bilingual text helpers: language detection, sentence splitting, keyword tokens.

Chinese is segmented with jieba; English with a regex and a small stop-word list.
Both are used by chunking, BM25, the evaluator's term coverage and query rewriting.

>>> from crag.text import detect_language, split_sentences
>>> detect_language("北京是中国的首都。")
'zh'
>>> split_sentences("First one. Second one! 第三句。")
['First one.', 'Second one!', '第三句。']
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")
# Sentence ends: CJK terminators (no space needed) or Latin terminators followed by space/end.
_SENT_END = re.compile(r"(?<=[。！？!?；;])\s*|(?<=[.])\s+(?=[A-Z0-9\"'“‘(\[\u4e00-\u9fff])|\n{2,}|\n(?=\s*[-*#\d])")
_ENTITY_END = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]{1,9}|#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6});$")
# An initial or a title before a name: "Richard E.", "Dr.", "St." (not "Jr.", which ends sentences).
_INITIAL_END = re.compile(r"(?:^|[\s(“\"'])(?:[A-Z]|Mr|Mrs|Ms|Dr|Prof|St|Rev|Gen|Lt|Col|Capt|Sgt|Mt|Gov|Sen|Rep)\.$")
# A bracket left open is closed within this many characters, or it was a stray one: gluing
# on to a far or missing ")" would make one sentence of a whole page.
_BRACKET_REACH = 160
# A table row as ingest writes it ("Yunque S5 | Q3 2023 shipments: 8,640", crag.ingest.tables):
# one line holding " | ", at most this long. A terminator inside a cell ("Note: Discontinued.
# Replaced by S7") does not end it: the row is one sentence, so a cell's quote is its whole row.
ROW_SEPARATOR = " | "
_ROW_REACH = 600
# A row's key (its text before the first separator) is a short name, not the start of prose that
# happens to hold a pipe ("the language {xx | x is a binary string}", "run cat a | grep b").
_ROW_KEY = re.compile(r"[^\n|。！？；!?;]{1,80} \| ")
_OPENERS, _CLOSERS = "([{（【", ")]}）】"
# Full-width ASCII forms (ＩＢＭ, １８８７, １２．５), common in Chinese text, read as ASCII: the
# token pattern below only knows ASCII, so without this "１８８７年" lost its year.
_FULLWIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)}
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:[.'’-][A-Za-z0-9]+)*|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")

EN_STOP = frozenset(
    """a an the and or but if of to in on at by for with from as is are was were be been being
    do does did done have has had having it its this that these those there here what which who whom
    whose when where why how i you he she we they me him her us them my your his our their not no
    so than then too very can could should would will shall may might must about into over under
    after before between during up down out off again further once all any both each few more most
    other some such only own same s t just don now also known called named one many much""".split()
)
ZH_STOP = frozenset(
    """的 了 是 在 和 与 及 或 也 都 就 而 被 把 对 于 从 以 之 其 这 那 这个 那个 哪 哪个 哪些 哪里 什么 谁
    多少 几 怎么 怎样 如何 为什么 为何 吗 呢 吧 啊 有 没有 个 一个 些 一些 等 中 上 下 里 为 所 着 过 给 让
    请 问 是否 还是 能 会 可以 可能 之一 什么样 哪一 哪年 何时 何 多 称 被称为 叫 叫做
    哪一年 哪所 哪家 哪位 哪儿 哪天 什么时候 时候 几年 几天 几个 几月 多久 多长 多大""".split()
)


def detect_language(text: str) -> str:
    """'zh' when CJK characters make up a noticeable share of letters, else 'en'."""
    cjk = len(_CJK.findall(text))
    latin = sum(len(w) for w in _LATIN_WORD.findall(text)) / 4  # ~4 letters per word
    return "zh" if cjk and cjk >= latin * 0.5 else "en"


def split_sentences(text: str) -> list[str]:
    """Split into sentences for Chinese and English; keeps terminators, drops blanks.

    Neither the semicolon of an HTML entity (scraped text keeps ``&ndash;`` as written), the
    dot of an initial or a title ("Richard E. Myers", "Dr. Li"), nor a terminator inside a
    bracket that closes soon after ("Kyaw Swe (, ; 10 February 1924 – 1982) was an actor")
    ends a sentence: a cut there parted a person's name from what they were. A table row (a
    line with ``" | "`` between its cells) is one sentence whatever its cells hold.

    >>> split_sentences("Ray Burton (1939 &ndash; 2013) was a politician. He served; he won.")
    ['Ray Burton (1939 &ndash; 2013) was a politician.', 'He served;', 'he won.']
    >>> split_sentences("Richard E. Myers is a judge. Dr. Li agrees.")
    ['Richard E. Myers is a judge.', 'Dr. Li agrees.']
    >>> split_sentences("Kyaw Swe (, ; born c. 1924) was an actor. 张伟（笔名；1958年—）是作家。")
    ['Kyaw Swe (, ; born c. 1924) was an actor.', '张伟（笔名；1958年—）是作家。']
    >>> split_sentences("Yunque S6 | Note: Discontinued. Replaced by S7\\n\\n云雀S6 | 备注: 停产。由S7替代")
    ['Yunque S6 | Note: Discontinued. Replaced by S7', '云雀S6 | 备注: 停产。由S7替代']
    """
    text = text.strip()
    spans: list[tuple[int, int]] = []  # each sentence's place in ``text``: a glued one keeps its own spacing
    at, glue = 0, False
    for part in _SENT_END.split(text):
        part = part.strip() if part else ""
        if not part:
            continue
        start = text.find(part, at)
        end = at = start + len(part)
        if glue:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
        glue = bool(
            _ENTITY_END.search(part)
            or _INITIAL_END.search(part)
            or _open_bracket(text, *spans[-1])
            or _inside_row(text, end)
        )
    return [text[a:b] for a, b in spans]


def is_table_row(sentence: str) -> bool:
    """``sentence`` is a table row as ingest writes it (one line, cells between ``" | "``).

    >>> is_table_row("Yunque S5 | Q3 2023 shipments: 8,640"), is_table_row("The set {xx | x is a string}.")
    (True, False)
    """
    return "\n" not in sentence and len(sentence) <= _ROW_REACH and _row_start(sentence, 0, len(sentence))


def table_cells(sentence: str) -> tuple[str, list[tuple[str, str]]] | None:
    """A table row's key and its ``(column header, value)`` cells; ``None`` for a sentence that is no row.

    What a figure in a row measures is its cell's header (and the row's key is what it is of):
    a check of a claimed figure reads it here, not from the words around it.

    >>> table_cells("Yunque S5 | Q1 2023 shipments: 7,200 | Q3 2023 shipments: 8,640")
    ('Yunque S5', [('Q1 2023 shipments', '7,200'), ('Q3 2023 shipments', '8,640')])
    >>> table_cells("Battery | 5200 mAh"), table_cells("A sentence.")
    (('Battery', [('', '5200 mAh')]), None)
    """
    if not is_table_row(sentence):
        return None
    key, *rest = sentence.split(ROW_SEPARATOR)
    cells = []
    for part in rest:
        header, colon, value = part.partition(": ")
        cells.append((header, value) if colon else ("", part))
    return key, cells


def _inside_row(text: str, end: int) -> bool:
    """``end`` falls inside a line that is a table row, with more of the row after it."""
    line_end = text.find("\n", end, end + _ROW_REACH)
    line_end = len(text) if line_end < 0 and len(text) - end < _ROW_REACH else line_end
    if line_end < 0 or not text[end:line_end].strip():
        return False
    start = text.rfind("\n", max(0, end - _ROW_REACH), end) + 1
    if start == 0 and end > _ROW_REACH:  # the line starts further back: too long to be a row
        return False
    return line_end - start <= _ROW_REACH and _row_start(text, start, line_end)


def _row_start(text: str, start: int, end: int) -> bool:
    """``text[start:end]`` opens with a row's key: a short name, brackets closed, then ``" | "``."""
    key = _ROW_KEY.match(text, start, end)
    if key is None:
        return False
    depth = 0
    for ch in key.group(0):
        depth += (ch in _OPENERS) - (ch in _CLOSERS)
    return depth == 0


def _open_bracket(text: str, start: int, end: int) -> bool:
    """``text[start:end]`` leaves a bracket open that closes within ``_BRACKET_REACH``."""
    depth = 0
    for ch in text[start:end]:
        if ch in "(（":
            depth += 1
        elif ch in ")）" and depth:
            depth -= 1
    if not depth:
        return False
    ahead = text[end : end + _BRACKET_REACH]
    return any(c in ahead for c in ")）")


@lru_cache(maxsize=1)
def _jieba() -> Any:
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def _sub_words(word: str, freq: dict[str, int]) -> list[str]:
    """The dictionary's (``freq``) two- and three-character words inside ``word``, as jieba's
    search mode emits them before the word itself (通信卫星 → 通信, 卫星)."""
    grams = [word[i : i + 2] for i in range(len(word) - 1)] if len(word) > 2 else []
    grams += [word[i : i + 3] for i in range(len(word) - 2)] if len(word) > 3 else []
    return [g for g in grams if freq.get(g)]


def zh_frequency(word: str) -> int:
    """How often jieba's dictionary saw ``word`` (0: not in it): the commoner of two translations.

    >>> zh_frequency("电池") > zh_frequency("蓄电池") > 0
    True
    """
    return int(_jieba().dt.FREQ.get(word, 0) or 0)


def zh_cut(text: str, *, hmm: bool = True) -> list[str]:
    """``text`` cut into Chinese words by the shared, quietly initialised jieba dictionary.

    ``hmm=False`` keeps to dictionary words (no guessed new words), for reading names.
    """
    return list(_jieba().cut(text, HMM=hmm))


@lru_cache(maxsize=1024)
def zh_pos(text: str) -> tuple[tuple[str, str], ...]:
    """Chinese words with their jieba part-of-speech tags (``nr``: a person's name), cached.

    >>> ("北京", "ns") in zh_pos("他住在北京")
    True
    """
    _jieba()  # the shared dictionary, initialised once and quietly
    import jieba.posseg

    return tuple((p.word, p.flag) for p in jieba.posseg.cut(text))


def tokenize(text: str, *, keep_stopwords: bool = False, search_mode: bool = True) -> list[str]:
    """Lower-cased word tokens; Chinese runs are segmented with jieba.

    ``search_mode`` (for indexing and matching) also emits the sub-words of long words
    (通信卫星 → 通信, 卫星, 通信卫星); precise mode gives one segmentation, for keywords.
    Full-width letters and digits count as their ASCII forms.

    >>> tokenize("１８８７年ＩＢＭ")
    ['1887', '年', 'ibm']
    """
    out: list[str] = []
    for m in _TOKEN.finditer(text.translate(_FULLWIDTH)):
        tok = m.group(0)
        if _CJK.match(tok):
            jieba = _jieba()
            for w in jieba.cut(tok):
                if not keep_stopwords and w in ZH_STOP:
                    continue  # with its sub-words: 哪一年 is no 一年
                if search_mode and len(w) > 2:
                    out.extend(g for g in _sub_words(w, jieba.dt.FREQ) if keep_stopwords or g not in ZH_STOP)
                out.append(w)
        else:
            low = tok.lower()
            if keep_stopwords or low not in EN_STOP:
                out.append(low)
    return out


def keywords(text: str, *, limit: int = 8) -> list[str]:
    """Content words in first-seen order, longest-first ties: a cheap keyword extractor."""
    seen: dict[str, int] = {}
    for i, tok in enumerate(tokenize(text, search_mode=False)):
        if len(tok) < 2 and not tok.isdigit():
            continue
        seen.setdefault(tok, i)
    # Prefer longer (more specific) words, then original order.
    ranked = sorted(seen, key=lambda w: (-min(len(w), 6), seen[w]))[:limit]
    return sorted(ranked, key=lambda w: seen[w])


def join_sentences(parts: Sequence[str]) -> str:
    """Join sentences back into text: no space around CJK, one space between Latin ones.

    >>> join_sentences(["北京是首都。", "上海很大。"]), join_sentences(["One.", "Two."])
    ('北京是首都。上海很大。', 'One. Two.')
    """
    out = ""
    for p in parts:
        if not p:
            continue
        sep = "" if not out or ord(out[-1]) > 0x2E80 or ord(p[0]) > 0x2E80 else " "
        out += sep + p
    return out


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def scrub_surrogates(value: Any) -> Any:
    """Replace lone surrogates (from ``"\\ud800"`` JSON escapes or undecodable argv bytes) with U+FFFD.

    They cannot be encoded as UTF-8, so the embedder, SQLite and every output would fail on
    them. Walks dicts and lists; other values pass through.

    >>> scrub_surrogates({"q": "a\\ud800b", "n": [1, "\\udcff"]})
    {'q': 'a�b', 'n': [1, '�']}
    """
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {scrub_surrogates(k): scrub_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_surrogates(v) for v in value]
    return value


def approx_tokens(text: str) -> int:
    """Rough LLM token count: ~1 per CJK character, ~1.3 per English word."""
    cjk = len(_CJK.findall(text))
    words = len(_LATIN_WORD.findall(text))
    return cjk + int(words * 1.3) + 1


# Characters a terminal acts on instead of showing: C0 and C1 controls (ESC starts colour,
# cursor and title sequences; 0x9b is an 8-bit CSI), DEL, bidirectional overrides and isolates
# (they reorder what is shown, so a file name can read as another), line and paragraph
# separators, and lone surrogates. Newline and tab stay in multi-line text.
_TERMINAL_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
_TERMINAL_UNSAFE_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def terminal_safe(text: str, *, one_line: bool = False) -> str:
    r"""``text`` with every character a terminal would act on shown escaped, as ``\x1b`` or ``\u202e``.

    The one escaping helper for text that reaches a terminal (document titles, file names,
    model answers, trace fields): a document cannot recolour the screen, move the cursor,
    set the window title or reorder a line. ``one_line`` escapes newlines and tabs as well,
    for table cells and one-line messages. C0 controls read ``\x1b``; the rest ``\u009b``,
    which is also a valid escape inside a JSON string (JSON encoders escape C0 themselves),
    so JSON output stays valid JSON.

    >>> terminal_safe("title\x1b[2J\u202egnp.exe\nnext")
    'title\\x1b[2J\\u202egnp.exe\nnext'
    >>> terminal_safe("a\tb\nc", one_line=True)
    'a\\tb\\nc'
    """
    pattern = _TERMINAL_UNSAFE_LINE if one_line else _TERMINAL_UNSAFE
    return pattern.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    if code == 0x0A:
        return "\\n"
    if code == 0x09:
        return "\\t"
    if code == 0x0D:
        return "\\r"
    return f"\\x{code:02x}" if code < 0x20 else f"\\u{code:04x}"
