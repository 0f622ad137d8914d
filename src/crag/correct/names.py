"""Who a text is about: names in questions, titles and defining sentences, in English and Chinese.

The pieces :mod:`crag.correct.bearers` is built from, each a pure function:

* :func:`split_title` — a disambiguated title: "Richard Harris (composer)" → ("Richard Harris", "composer");
* :class:`Name` — a person's name compared as people write it: case, accents, middle names,
  "Jr." and the interpunct of transliterated names (理查德·哈里斯, 理查德哈里斯) do not matter;
* :func:`define` — the sentence that says who a text's subject is: "John Carter (1884–1951) was a
  Welsh painter." → ``Definition(years=("1884", "1951"), description="a Welsh painter")``;
* :func:`personal` — whether a text is about a person (pronouns, life years, 出生 …);
* :func:`descriptor` — the words a question puts beside a name to say which bearer it means
  ("the Welsh painter John Carter", "作曲家理查德·哈里斯").

>>> split_title("理查德·哈里斯 (作曲家)")
('理查德·哈里斯', '作曲家')
>>> Name.of("John Blake, Jr.").find("What is John Blake Jr.'s occupation?")
(8, 21)
>>> define("Michael Hutchings (born 1949) is a professional chef who owns a restaurant.", Name.of("Michael Hutchings"))
Definition(years=('1949',), description='a professional chef', life='born 1949')
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass, field

from crag.text import EN_STOP, ZH_STOP, split_sentences, zh_cut, zh_pos

__all__ = [
    "CJK",
    "DOTS",
    "PARTICLES",
    "Definition",
    "Name",
    "asks_who",
    "define",
    "descriptor",
    "dotted_names",
    "en_description",
    "fold",
    "life_years",
    "personal",
    "same_name",
    "split_title",
    "subject",
    "words",
    "zh_description",
]

CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
DOTS = re.compile(r"[·・‧•．∙⋅]")
_TITLE = re.compile(r"^\s*(.+?)\s*[(（]\s*([^()（）]{1,60}?)\s*[)）]\s*$")
_SUFFIXES = frozenset({"jr", "sr", "ii", "iii", "iv"})
_GIVEN = frozenset({"don", "will", "may", "june", "april", "august"})  # given names that are also stop words
PARTICLES = frozenset("de del della di da du la le van von der den ter bin al y".split())
YEAR = re.compile(r"(?<!\d)(1\d{3}|20\d{2})(?!\d)")
# "X (…) is/was a …": the defining sentence of an English biography (one bracket may nest:
# "(21 February 1841 in Nieder-Zedlitz (today Siedlnica) – 1923)").
_EN_DEF = re.compile(
    r"^(?P<subj>[^\s(),;:.][^(),;:]{1,80}?)\s*(?:\((?P<paren>(?:[^()]|\([^()]{0,60}\)){0,160})\)\s*)?,?\s*"
    r"(?:is|was|has\s+been)\s+(?P<desc>(?:a|an|the)\s+[^;]{2,300})"
)
# "X（…），…" or "X是一位…": the defining sentence of a Chinese biography.
_ZH_DEF = re.compile(
    r"^(?P<subj>[\u4e00-\u9fff·・A-Za-z\s]{2,20}?)\s*(?:[（(](?P<paren>[^（）()]{0,160})[）)])?\s*"
    r"(?:[，,]\s*|是(?:一[位名个])?)(?P<desc>[^。；;]{2,200})"
)
# Where an English description stops being about who the person is.
_EN_CUT = re.compile(
    r";|,?\s(?:who|which|that|whose|where|best|known|born|from\s+\d|and\s+(?:is|was|has|had))\b|\s\(|,\s(?:he|she|and\s+the)\b"
)
_EN_TAIL = re.compile(r"\s(?:of|in|for|at|with|from|on|to|during|between|since)\s")
_ZH_CUT = re.compile(r"[，,。；;（(]")
_ZH_ARTICLE = re.compile(r"^(?:一[位名个]|[位名])")
_EN_PERSON = re.compile(r"\b(?:he|she|his|her|him|born)\b", re.I)
_ZH_PERSON = re.compile(r"[他她]|出生|生于|逝世|去世")
# A description's first word after the article, capitalised: a nationality ("a Sri Lankan politician").
_EN_DEMONYM = re.compile(r"^(?:an?|the)\s+(?:former\s+|retired\s+)?[A-Z]")
# Heads of English descriptions that name what a person does ("a film director", "a monk").
_PERSON_NOUN = re.compile(
    r"(?:er|or|ist|ian|man|woman|ess|eer|ier|ant|ent|monk|priest|rabbi|chef|poet|judge|bishop|nun|king|queen"
    r"|saint|diplomat|official|architect|athlete|pilot|model|cleric|noble|aristocrat|activist|engineer)$"
)
_ZH_PERSON_END = re.compile(r"(?:[家员师手者官人星士长匠商僧帝王后将监裁]|经理|助理|秘书|主任|董事)$")
# Heads of descriptions that name places and things, never people ("a river in Hampshire").
_THINGS = frozenset(
    """river town village city station county district municipality commune parish region area island
    lake mountain street road building church school college university company band film album song
    novel book game magazine newspaper ship genus species railway line route bridge castle museum
    park""".split()
)
# Words a description shares with any other: they tell no one apart.
_GENERIC = frozenset(
    """former retired professional known best famous noted notable born died member also active
    one two first second later american british english""".split()
)
_ARTICLES = frozenset({"the", "a", "an"})
# The words of a question that asks who someone is ("What is X's occupation?", "X是做什么的？").
_WHO_EN = frozenset(
    """what who whom is was are were s the a an his her their occupation occupations profession job jobs
    does did do for living work works worked as kind of by trade""".split()
)
_WHO_ZH = frozenset(
    "的 是 谁 什么 职业 工作 身份 做 干 从事 哪 一位 位 人 人物 呢 请问 是做 做什么 干什么 什么样".split()
)
# "John Carter (painter)", "John Carter, the painter, …": a qualifier after the name.
_AFTER = re.compile(
    r"\s*(?:\(([^()]{1,40})\)|,?\s+the\s+((?:[\w’'-]+\s+){0,3}[\w’'-]+?)(?=[,?.!]|\s+(?:is|was|who|did|do|does|born)\b))"
)
# Characters no name holds: a "name" with one is a phrase ("李明是", "哪位").
_ZH_FUNCTION = re.compile(r"[的了是在吗呢吧啊哪谁么，。？！、：；\s]")


def fold(text: str) -> str:
    """Lower case, accents off, interpuncts and punctuation as spaces (Chinese kept), spaces collapsed.

    >>> fold("Nándor  Balázs's"), fold("理查德・哈里斯")
    ('nandor balazs s', '理查德·哈里斯')
    """
    norm = unicodedata.normalize("NFKD", DOTS.sub("·", text))
    plain = "".join(c for c in norm if not unicodedata.combining(c)).lower()
    return " ".join(re.sub(r"[^\w·]+|_", " ", plain).split())


def split_title(title: str) -> tuple[str, str]:
    """``(base, disambiguator)`` of a title; the disambiguator is ``""`` when there is none.

    >>> split_title("John Barnes (musician)"), split_title("Richard_Harris_(composer)"), split_title("Ernst Timme")
    (('John Barnes', 'musician'), ('Richard Harris', 'composer'), ('Ernst Timme', ''))
    """
    title = title.replace("_", " ").strip()
    m = _TITLE.match(title)
    return (m.group(1).rstrip(" ,"), m.group(2)) if m else (title, "")


@dataclass(frozen=True)
class Name:
    """A person's name as it is compared: its words (Latin script), or the whole name without
    interpuncts (Chinese). Build one with :meth:`of`; ``None`` for what cannot be a person's
    name (one Latin word, one Chinese character, a phrase).

    >>> Name.of("John Blake, Jr.") == Name.of("john blake jr"), Name.of("Timme"), Name.of("Don R. Swanson").key
    (True, None, ('don', 'r', 'swanson'))
    """

    text: str = field(compare=False)  # as first written
    key: tuple[str, ...] = ()

    @property
    def cjk(self) -> bool:
        return bool(CJK.search(self.key[0]))

    @classmethod
    def of(cls, text: str) -> Name | None:
        folded = fold(text)
        if CJK.search(folded):
            key = folded.replace("·", "").replace(" ", "")
            ok = 2 <= len(key) <= 12 and not _ZH_FUNCTION.search(key)
            return cls(text.strip(), (key,)) if ok else None
        tokens = folded.split()
        # "The Tower" is no name, "Don Swanson" is
        function = bool(tokens) and tokens[0] in EN_STOP and tokens[0] not in _GIVEN
        if len(tokens) < 2 or len(tokens) > 6 or function or not all(t.isalpha() for t in tokens):
            return None
        return cls(text.strip(), tuple(tokens))

    def compatible(self, other: Name) -> bool:
        """Whether ``other`` can be the same person's name written more or less fully: the same
        first and last word, one's words in the other's order with at most two middle names
        more ("Raymond Burton", "Raymond S. Burton"); Chinese names are equal.

        >>> Name.of("Raymond S. Burton").compatible(Name.of("Raymond Burton"))
        True
        >>> Name.of("John Barnes").compatible(Name.of("John Barnes Chance"))
        False
        """
        if self.cjk or other.cjk:
            return self == other
        short, long = sorted((self.key, other.key), key=len)
        if short[0] != long[0] or short[-1] != long[-1] or len(long) - len(short) > 2:
            return False
        words = [(w, 0, 0) for w in long[1:]]
        return _match_rest(short[1:], words) is not None and len(short) > 1

    def find(self, text: str) -> tuple[int, int] | None:
        """Where the name is written in ``text`` (character offsets), or None.

        A Latin name matches its words in order, with at most two middle names between them
        in ``text`` ("James Msekela" in "James Alex Msekela"), but no particle ("Maurice
        Boucher" is not "Maurice Le Boucher").

        >>> Name.of("James Msekela").find("What is James Alex Msekela's job?")
        (8, 26)
        >>> Name.of("James Alex Msekela").find("James Msekela") is None
        True
        """
        if self.cjk:
            return _find_cjk(self.key[0], text)
        words = [(fold(m.group(0)), m.start(), m.end()) for m in re.finditer(r"[^\W_]+", text)]
        for i, (w, start, _) in enumerate(words):
            if w == self.key[0]:
                end = _match_rest(self.key[1:], words[i + 1 :])
                if end is not None:
                    return start, end
        return None


def _match_rest(rest: tuple[str, ...], words: list[tuple[str, int, int]]) -> int | None:
    """The end offset of ``rest`` matched in order at the start of ``words``, skipping middle names."""
    at, skipped, end = 0, 0, None
    for want in rest:
        while at < len(words) and words[at][0] != want:
            if words[at][0] in PARTICLES or want in _SUFFIXES or skipped >= 2:
                return None
            at, skipped = at + 1, skipped + 1
        if at == len(words):
            return None
        end, at = words[at][2], at + 1
    return end


def dotted_names(text: str) -> list[str]:
    """Transliterated names written with an interpunct (理查德·哈里斯), whole.

    A segmenter cuts them at the dot and often joins the last part to the next word
    ("哈里斯出 生于"), or cuts a long part in pieces ("奥 弗莱 厄 蒂"); each part is the word
    beside the dot, or the run of single characters that are not function words, and the
    pieces of a name that follow it.

    >>> dotted_names("作曲家理查德·哈里斯出生于哪一年？"), dotted_names("迈克尔·哈钦斯的职业是什么？")
    (['理查德·哈里斯'], ['迈克尔·哈钦斯'])
    >>> dotted_names("画家安·史密斯是谁？"), dotted_names("布里迪·奥弗莱厄蒂的职业是什么？")
    (['安·史密斯'], ['布里迪·奥弗莱厄蒂'])
    """
    out: list[str] = []
    for m in re.finditer(r"[\u4e00-\u9fff]+(?:[·・‧•．][\u4e00-\u9fff]+)+", text):
        parts = DOTS.split(m.group(0))
        first = _piece(zh_cut(parts[0], hmm=False), backward=True)
        last = _piece(zh_cut(parts[-1], hmm=False))
        if first and last:
            out.append("·".join([first, *parts[1:-1], last]))
    return out


def _piece(words: list[str], *, backward: bool = False) -> str:
    """The name part at the start of ``words`` (at their end when ``backward``): one word of two
    or more characters, or a run of single characters that are not function words; then the
    words after it that are pieces of a name ("弗莱", "厄" of 奥弗莱厄蒂)."""
    order = words[::-1] if backward else words
    run: list[str] = []
    for i, w in enumerate(order):
        single = len(w) == 1 and not _ZH_FUNCTION.match(w) and w not in "出生于为和与在被把从向对"
        opening = (i == 0 and len(w) > 1) or (single and (not run or len(run[-1]) == 1))
        if not (opening or (run and _name_piece(w))):
            break
        run.append(w)
    return "".join(run[::-1] if backward else run)


def _name_piece(word: str) -> bool:
    """A transliterated name's piece: a word the segmenter tags as one ("nrt"), or one noun
    character ("夫" of 吕姆克尔夫). Not every "nr" word: it tags 巨星 and 沙皇 so too."""
    flag = zh_pos(word)[0][1] if word else ""
    return flag == "nrt" or (len(word) == 1 and flag in ("nr", "ns", "n", "nz") and not _ZH_FUNCTION.match(word))


def _find_cjk(key: str, text: str) -> tuple[int, int] | None:
    """``key`` in ``text`` with interpuncts and spaces ignored."""
    kept = [(i, c) for i, c in enumerate(text) if not DOTS.match(c) and c != "·" and not c.isspace()]
    plain = "".join(c for _, c in kept)
    at = plain.find(key)
    if at < 0:
        return None
    return kept[at][0], kept[at + len(key) - 1][0] + 1


@dataclass(frozen=True)
class Definition:
    """What a text's defining sentence says of its subject: life years, and who the subject is."""

    years: tuple[str, ...]
    description: str
    life: str = ""  # the years as shown: "born 1949", "1884–1951", "1930年—2002年"
    sentence: str = field(default="", repr=False)  # the defining sentence itself


def define(text: str, name: Name) -> Definition | None:
    """The defining sentence of ``text`` about ``name`` (among its first three), or None.

    >>> define("理查德·哈里斯（1930年10月1日—2002年10月25日），爱尔兰演员、歌手。", Name.of("理查德·哈里斯"))
    Definition(years=('1930', '2002'), description='爱尔兰演员、歌手', life='1930年—2002年')
    """
    for sentence in split_sentences(html.unescape(text))[:3]:
        m = (_ZH_DEF if name.cjk else _EN_DEF).match(sentence.strip())
        if m is None or not same_name(name, m.group("subj")):
            continue
        desc = zh_description(m.group("desc")) if name.cjk else en_description(m.group("desc"))
        paren = m.group("paren") or ""
        years = tuple(YEAR.findall(paren))
        if desc or years:
            return Definition(years, desc, life_years(paren, years, zh=name.cjk), sentence.strip())
    return None


def subject(text: str) -> Name | None:
    """The person ``text`` defines in one of its first three sentences ("X (born 1949) is a chef."), or None.

    >>> subject("Title\\n\\nAda Lovelace (1815–1852) was an English mathematician.").text
    'Ada Lovelace'
    """
    for sentence in split_sentences(html.unescape(text))[:3]:
        for rule in (_EN_DEF, _ZH_DEF):
            m = rule.match(sentence.strip())
            name = Name.of(m.group("subj")) if m else None
            if name is not None and define(sentence, name) is not None:
                return name
    return None


def same_name(name: Name, subj: str) -> bool:
    """``subj`` is ``name``: the same Chinese name, or the Latin name with middle names in
    between, or written with fewer of them ("Raymond Burton" for "Raymond S. Burton")."""
    if name.cjk:
        return Name.of(subj) == name
    if name.find(subj) is not None:
        return True
    other = Name.of(subj)
    return other is not None and name.compatible(other)


def en_description(desc: str) -> str:
    """Who an English defining clause says the person is, cut where it stops saying so."""
    cut = _EN_CUT.search(desc)
    desc = desc[: cut.start()] if cut else desc
    desc = desc.strip().rstrip(".,")
    if len(desc.split()) > 10:  # a long description keeps its head: "a Japanese politician"
        tail = _EN_TAIL.search(desc, len(" ".join(desc.split()[:2])))
        desc = desc[: tail.start()] if tail else desc
    if len(desc.split()) > 12:
        head = " ".join(desc.split()[:12])
        desc = head[: head.rfind(",")] if "," in head else head
    return desc.strip().rstrip(",")


def zh_description(desc: str) -> str:
    """Who a Chinese defining clause says the person is (its first phrase, 2–30 characters)."""
    cut = _ZH_CUT.search(desc)
    desc = _ZH_ARTICLE.sub("", desc[: cut.start()] if cut else desc).strip()
    return desc if 2 <= len(desc) <= 30 else ""


def life_years(paren: str, years: tuple[str, ...], *, zh: bool) -> str:
    """The life years as shown beside a name: "1884–1951", "born 1949", "1930年出生"."""
    if not years:
        return ""
    if len(years) >= 2:
        return f"{years[0]}年—{years[1]}年" if zh else f"{years[0]}–{years[1]}"
    if zh:
        return f"{years[0]}年" + ("逝世" if re.search("逝|卒|去世", paren) else "出生")
    return ("died " if re.search(r"\b(?:died|d\.)", paren) else "born ") + years[0]


def personal(text: str, definition: Definition | None) -> bool:
    """Whether ``text`` (and its defining sentence) is about a person, not a place or a thing.

    >>> personal("The river rises near Devizes.", Definition((), "a river in Wiltshire"))
    False
    >>> personal("", Definition((), "an American/Israeli violinist")), personal("", Definition((), "a film director"))
    (True, True)

    Years alone are no sign: events and institutions have them too ("中国博客第一案（2006年）").
    """
    desc = definition.description if definition else ""
    core = re.split(r"\s(?:of|in|for|at|with|from|on|to|near)\s", desc.lower())[0]
    head = (re.findall(r"[a-z]+", core) or [""])[-1]
    last = (re.findall(r"[a-z]+", desc.lower()) or [""])[-1]
    if last not in _THINGS and _PERSON_NOUN.search(last) and not re.search(r"\s(?:in|at|on|near)\s", desc):
        return True  # "Church of Ireland bishop": the head comes last
    if head in _THINGS:
        return False
    if _EN_PERSON.search(text) or _ZH_PERSON.search(text) or _EN_DEMONYM.match(desc):
        return True
    return bool(_PERSON_NOUN.search(head) or (CJK.search(desc) and _ZH_PERSON_END.search(desc)))


def words(text: str, *, occupations: bool = False) -> frozenset[str]:
    """Content words of a description or disambiguator, stemmed; with ``occupations``, only
    those that say what a person does (no nationalities, places or generic words).

    >>> sorted(words("an English former footballer and manager", occupations=True))
    ['footballer', 'manager']
    >>> sorted(words("英国作曲家", occupations=True))
    ['作曲家']
    """
    if CJK.search(text):
        pairs = zh_pos(text)
        return frozenset(w for w, flag in pairs if len(w) >= 2 and w not in ZH_STOP and _zh_keep(flag, occupations))
    out = set()
    found = list(re.finditer(r"[A-Za-z]+", text))
    if occupations and found and _PERSON_NOUN.search(found[-1].group(0).lower()):
        out.add(_stem(found[-1].group(0).lower()))  # "the Chief District Judge": the head, capitalised
    for m in found:
        w = m.group(0)
        if w.lower() in EN_STOP or w.lower() in _ARTICLES or len(w) < 3:
            continue
        if occupations and (w[0].isupper() or w.lower() in _GENERIC):
            continue
        out.add(_stem(w.lower()))
    return frozenset(out)


def _zh_keep(flag: str, occupations: bool) -> bool:
    return not occupations or not flag.startswith(("ns", "nr", "nt", "a", "d", "m", "t"))


def _stem(word: str) -> str:
    for suffix in ("es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix) and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def asks_who(question: str, at: tuple[int, int]) -> bool:
    """Whether ``question`` asks only who the name written at ``at`` is: its occupation, what it
    does. A defining sentence answers that ("a Welsh painter").

    >>> asks_who("What is John Carter's occupation?", (8, 19)), asks_who("When was John Carter born?", (9, 20))
    (True, False)
    >>> [asks_who(q, (0, 2)) for q in ("李明是做什么的？", "李明的职业是什么？", "李明在哪里出生？")]
    [True, True, False]
    """
    rest = question[: at[0]] + " " + question[at[1] :]
    if CJK.search(rest):
        return all(w in _WHO_ZH for w, _ in zh_pos(re.sub(r"[\W_]+", "", rest)))
    return all(w in _WHO_EN for w in re.findall(r"[a-z]+", rest.lower()))


def descriptor(question: str, at: tuple[int, int]) -> str:
    """The words that qualify the name written at ``at`` in ``question``, or ``""``.

    English: between an article and the name ("the Welsh painter John Carter"), after the name
    ("John Carter, the painter", "John Carter (painter)"). Chinese: right before the name up
    to a function word ("英国作曲家理查德·哈里斯"), or in brackets after it.

    >>> q = "When was the Welsh painter John Carter born?"
    >>> descriptor(q, (27, 38))
    'Welsh painter'
    >>> descriptor("作曲家理查德·哈里斯出生于哪一年？", (3, 10))
    '作曲家'
    """
    start, end = at
    before, after = question[:start], question[end:]
    if CJK.search(question[start:end]):
        bracket = re.match(r"\s*[（(]([^（）()]{1,20})[）)]", after)
        if bracket:
            return bracket.group(1)
        run = re.search(r"[^的了是在和与及或也都就而被把对从以之其这那哪谁吗呢有个为请问，。？！、：；\s]+$", before)
        return run.group(0) if run and _ZH_PERSON_END.search(run.group(0)) else ""
    m = re.search(r"\b(?:the|a|an)\s+((?:[\w’'-]+\s+){0,3}[\w’'-]+)\s+$", before[-60:], re.I)
    if m:  # the words after the last article before the name, if they are all content words
        tail = re.split(r"\b(?:the|a|an)\s+", m.group(0), flags=re.I)[-1].split()
        if tail and not any(w.lower() in EN_STOP for w in tail):
            return " ".join(tail)
    after = re.sub(r"^['’]s\b", "", after)
    m = _AFTER.match(after)
    if m:
        return m.group(1) or m.group(2) or ""
    return ""
