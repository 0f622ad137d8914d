"""Does a source state what a claim asserts, or only talk about the same thing?

The lexical check of :mod:`crag.generate.grounding` looks up a sentence's *new* words: those
the question does not hold. That lets a near miss through: "The CEO of Kestrel Labs is Wang
Lei [1]" brings only the name, and a source saying Wang Lei is the sales director holds it.
The question's own words are the relation the claim asserts (the CEO, the battery capacity,
a company car), and a source states the claim only if it states that relation too.

So a claim is held by a cited source when one **window** of it — two neighbouring
sentences (or one table row), with the source's title — holds

* every word the claim repeats from the question (its relation: ``restated``),
* for the sentence that answers, the question's own figures ("in 1629", "Q3 2023"), and no
  other year in their place,
* every figure, and the unit written after it ("8,640 mAh" needs "mAh", 毫安时 or the like
  next to 8,640's row, not a shipments count), and every name the claim brings,
* most of the claim's new words (the old rule, now within one window),
* for the sentence that answers, all of this in one sentence of the window (under the title):
  two sentences that hold it only side by side are left to the judge, and
* for a "no" to a yes/no question, a negation: silence is not "no".

When no window holds the claim in these words, the claim may still be stated in others
(a paraphrase, another language: "battery capacity" for 电池容量). A **judge** decides
those: the model's P(yes) that the best window states the answer to the question
(:func:`crag.correct.verify.verify_messages`, one short prompt per sentence, read from one
token). Without a judge the relation words must at least appear in the source.
A "no", a figure or a name is never left to the judge: it has to be written. A claim two
sentences hold side by side is also read as a claim (:func:`crag.correct.verify.claim_messages`,
P(yes) that the window states it, ``ENTAILS``): read as an answer to the question, "保险公司表示…。
…鑫诺卫星通信有限公司表示…" passes for "鑫诺 is an insurance company".

>>> from crag.types import Strip
>>> row = Strip("Yunque S5 | Q3 2023 shipments: 8,640", "t.md", "internal", "Shipments")
>>> check = RelationCheck("What is the Yunque S5 battery capacity?")
>>> check.lexical("The Yunque S5 battery capacity is 8,640 mAh.", row).held
False
>>> spec = Strip("Yunque S5 specifications. Its battery capacity is 5200 mAh.", "s.md", "internal")
>>> check.lexical("The Yunque S5 battery capacity is 5200 mAh.", spec).held
True
>>> RelationCheck("Does Kestrel Labs give employees a company car?").lexical(
...     "No, Kestrel Labs does not give employees a company car.", row).held
False
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

from crag.correct.verify import claim_messages, verify_messages
from crag.errors import CragError
from crag.generate.grounding import UNITS, SourceTerms, is_closed, new_terms, symbol_units
from crag.grade.signals import asked_kind, question_focus
from crag.protocols import LLM, YesNoLLM, offers
from crag.synonyms import SLOTS, synonyms
from crag.text import EN_STOP, detect_language, split_sentences, zh_pos
from crag.types import Strip

__all__ = ["ACROSS", "CALIBRATED", "ENTAILS", "Judge", "RelationCheck", "Verdict", "judge_threshold", "missing_terms",
           "model_judge", "negative_reply"]  # fmt: skip


class Judge(Protocol):
    """``judge(question, passage)``: P(the passage states the answer to the question), or None
    when the model could not be asked (the call failed, no token probabilities). With ``claim``:
    P(the passage states that claim), the entailment reading of a claim no single sentence holds."""

    def __call__(self, question: str, passage: str, claim: str | None = None) -> float | None: ...


# Per bundled model: the highest P(yes) that keeps 90 % of the passages stating the answer on
# near-miss pairs (benchmarks/verify_correct.py --pairs); None: too weak to ask (the 0.5B's
# AUROC is 0.67 en / 0.79 zh, and no threshold keeps 90 %).
CALIBRATED: dict[str, float | None] = {"qwen2.5-coder-1.5b": 0.6, "qwen2.5-coder-0.5b": None}
ACROSS = "(across sentences)"  # a Verdict's ``missing`` when only two sentences side by side hold the claim
ENTAILS = 0.9  # P(yes) that a window states a claim its sentences hold only side by side (see settle)
STRICT = 0.7  # P(yes) that holds a relation its source never writes in its own language: the lowest
# threshold that catches ≥ 90 % of near misses in both languages on near-miss pairs (0.91 en, 1.0 zh)
_CJK = re.compile(r"[\u3400-\u9fff]")
WINDOW_CHARS = 600  # the judge reads at most this much: a title and two sentences
_YEAR = re.compile(r"1[0-9]{3}|20[0-9]{2}")  # a year dates a claim; it is rarely the slot a near miss swaps
_YEAR_IN = re.compile(r"(?<![\d,.])(?:1[0-9]{3}|20[0-9]{2})(?![\d,.]\d|\d)")  # a year written in a text
_ASKS_TIME = re.compile(r"\bwhen\b|\b(?:what|which) (?:year|date|month|day)|哪一?年|什么时候|何时|几月|哪天|几号", re.I)
_GLUED = re.compile(r"(\d+)([\u4e00-\u9fff]{1,2})")  # a figure and the character after it: 2021年, 10天
# Capitalised, yet a date, not a name: "went on sale in April 2023" names no one.
_CALENDAR = frozenset(
    """january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday""".split()
)
_ZH_PERSON = frozenset({"nr", "nrfg", "nrt"})  # jieba's tags of a person's name
# A capitalised word after a sentence's first word: a proper noun ("Sainte Foy", "Kent-Brown").
_EN_PROPER = re.compile(r"(?<=[\w,;:)\]’'\"] )[A-Z][a-z]+(?:-[A-Z][a-z]+)?\b")  # its parts are looked up
_ROW = " | "  # between the cells of a table row (crag.ingest.tables)
_LEAD_CHARS = 160  # a line this short before a table says what its rows are about
# A figure and the word written after it: "8,640 mAh", "5200毫安时", "185 g", "3.5 kg".
_FIGURE_UNIT = re.compile(r"\d[\d,，.]*\s*([A-Za-z%‰]{1,5}\b|[\u4e00-\u9fff]{1,3})?")
# Units written the same way in both languages, so a zh source holds an en claim's unit.
# A reply that says no. In Chinese only where 不 / 没 / 未 negate: not 不同, 不断, 无线.
_NEGATIVE = re.compile(
    r"^\W*(?:no\b|not\b|none\b|never\b|否|不|没|并不|并没|无)"
    r"|\b(?:not|never|no longer|none)\b|n[’']t\b|不(?![同断错久少仅但过论管])|没有|并未|未(?!来)",
    re.I,
)
# Verbs any question may use: "None of them mentions “give”" names nothing that is missing.
_LIGHT = (
    frozenset(
        """give gives gave given get gets got make makes made take takes took use uses used provide provides
        offer offers offered receive receives include includes need needs want go goes went come came allow
        allowed allows happen happened become became keep kept put let say says tell told work works 提供 给 让
        得到 获得 需要 使用 包括 允许 发生 成为 进行 属于""".split()
    )
    # …and adverbs that say how often or how much, not what: "What concept is *frequently* used to
    # define complexity classes?" is answered by "Many complexity classes are defined using …".
    | frozenset(
        """often frequently usually commonly generally typically mainly mostly primarily largely specifically
        particularly especially 通常 经常 常常 往往 尤其""".split()
    )
    | SLOTS  # the slot a question asks to fill: an answer names it rather than writes it
)
# Endings that derive one English word from another (confus-ion / confus-ed); longest first.
_DERIVATIONAL = (
    "ations ation itions ition tions tion sions sion ions ion ments ment ness ities ity ances ance ences ence "
    "als al ers er ors or ives ive"
).split()
# Irregular English verbs whose forms a question and a source write differently ("When did
# she win" / "she won"): each form maps to the others.
_IRREGULAR: dict[str, tuple[str, ...]] = {
    form: tuple(f for f in group.split("/") if f != form)
    for group in """win/won begin/began/begun buy/bought build/built sell/sold lead/led hold/held leave/left pay/paid
    run/ran teach/taught speak/spoke/spoken grow/grew/grown fly/flew/flown meet/met bring/brought
    think/thought find/found lose/lost send/sent spend/spent stand/stood choose/chose/chosen fall/fell/fallen
    drive/drove/driven eat/ate/eaten know/knew/known see/saw/seen sing/sang/sung rise/rose/risen shoot/shot
    write/wrote/written break/broke/broken bear/bore/born catch/caught fight/fought forget/forgot/forgotten
    hide/hid/hidden lay/laid lend/lent mean/meant ride/rode/ridden ring/rang/rung seek/sought steal/stole/stolen
    strike/struck swim/swam/swum throw/threw/thrown wear/wore/worn draw/drew/drawn tell/told feel/felt
    sleep/slept sit/sat dig/dug feed/fed hang/hung shake/shook wake/woke freeze/froze/frozen drink/drank/drunk
    go/went/gone do/did/done have/had be/was/were/been""".split()
    for form in group.split("/")
}
# Words company documents write for one relation, in the same language: a question's "成立" is the
# handbook's 创办 ("创办青岚科技"), a question's "founded" a page's "established". Only exact
# equivalents: a near miss must still lack its relation (a CEO is no chairman).
_ZH_PARTICLES = "于了的是在和与及着过为被把对从以之"
_NEGATION = re.compile(
    r"\b(?:not|no|never|none|without|nor|neither|excluded?|excluding|except)\b|n[’']t\b"
    r"|不|没有|没|未|无|非|禁止|除外|不含|不包括",
    re.I,
)


@dataclass
class Verdict:
    """How one claim fared against one source: ``held``, and by what (``how``: ``words``,
    ``judge``, ``relation`` without a judge) or why not (``missing``: the relation words or
    units no window holds; ``probability``: the judge's P(yes) when it was asked)."""

    held: bool
    how: str = ""
    window: str = ""
    missing: list[str] = field(default_factory=list)
    probability: float | None = None


class RelationCheck:
    """Checks answer sentences for the relation the question asks (see the module docstring).

    ### Usage example
    >>> from crag.types import Strip
    >>> src = Strip("Wang Lei is the sales director for southern China.", "a.md", "internal", "Kestrel Labs")
    >>> check = RelationCheck("Who is the CEO of Kestrel Labs?")
    >>> v = check.lexical("The CEO of Kestrel Labs is Wang Lei.", src)
    >>> v.held, v.missing
    (False, ['ceo'])
    >>> check.settle("The CEO of Kestrel Labs is Wang Lei.", src, judge=lambda q, p: 0.2).held
    False
    """

    def __init__(self, question: str, *, threshold: float = 0.6) -> None:
        self.question = question
        self.threshold = threshold
        self.closed = is_closed(question)
        # A yes/no question's claim is its own proposition: "No [1]." asserts the question's words.
        self._asked = new_terms(question, "") if self.closed else []
        # What the question asks of its subject ("battery capacity"): a figure must come with it.
        subject, focus = question_focus(question)
        # …less the kind of thing it asks for ("year" of "What year…", 学校 of "什么学校"): the answer fills it.
        kind = asked_kind(question)
        self._focus = [t for t in focus if t not in _LIGHT and not _is_figure(t) and t not in kind]
        # Whom or what it asks about: an answer that leaves it out may be about another one (the Suzhou
        # office's head count for the Rotterdam one's): its table row, or its page, must still name it.
        self._subject = [t for t in subject if t not in _LIGHT and not _is_figure(t)]
        # The figures it asks with ("in 1629", "Q2 2020") are the slot a near miss of the same event
        # swaps: the answer's window must write them, and an answer dated by another year is about
        # another event even when its source names both (Taqi al-Din's turbine of 1551 for the one
        # of 1629). Not so when it asks a time: in "When … after the 1760 flood?" a year places it.
        asks_time = bool(_ASKS_TIME.search(question))
        self._years = set() if asks_time else set(_YEAR_IN.findall(question))
        self.figures = [t for t in new_terms(question, "") if _is_figure(t) and not (asks_time and _YEAR.fullmatch(t))]
        self._windows: dict[str, list[tuple[str, SourceTerms]]] = {}

    def needs(self, sentence: str, *, answers: bool = False) -> tuple[list[str], list[str], list[str]]:
        """The claim's ``restated`` relation words, its ``new`` words and its ``units``.

        ``answers``: the sentence is the answer's first claim, the one that answers; it must
        state what the question asks (its focus words, or in the judge's reading), not only
        what it says: "王磊，首席硬件工程师" is true and no answer to who the CEO is."""
        new = new_terms(sentence, self.question)
        every = new_terms(sentence, "")
        # light verbs (give, get, provide…) say how, not what: "provide cars" states "give cars"
        restated = [t for t in every if t not in new and t not in _LIGHT]
        restated += [t for t in self._asked if t not in restated and t not in new and t not in _LIGHT]
        if answers or any(_is_figure(t) and not _YEAR.fullmatch(t) for t in new):  # "8,640": the asked attribute's
            restated += [t for t in self._focus if t not in restated and t not in new]
        if answers:
            restated += [t for t in self._subject if t not in restated and t not in new]
            restated += [t for t in self.figures if t not in restated]
        return restated, new, _units(sentence)

    def lexical(self, sentence: str, source: Strip, *, answers: bool = False) -> Verdict:
        """The best window of ``source`` for ``sentence``, and whether its words state the claim."""
        if answers and self._years and (years := set(_YEAR_IN.findall(sentence))) and not years & self._years:
            return Verdict(
                False, "", "", [f"(dated {', '.join(sorted(years))}, asked {', '.join(sorted(self._years))})"]
            )
        restated, new, units = self.needs(sentence, answers=answers)
        named = self.names(sentence)
        negative = self.closed and negative_reply(sentence)
        # The subject words the claim leaves out: a prose window may name it only in its page
        # ("It was founded in 2014" under "About Kestrel Labs"); a table row must (its row key).
        unsaid = set(restated) & set(self._subject) - set(new_terms(sentence, ""))
        page = SourceTerms(f"{source.title} {source.text}") if unsaid else None
        # what one sentence must hold for the answer: the relation, less the subject its page names
        said = [t for t in restated if not (page is not None and t in unsaid and _holds(page, t))]
        best: tuple[float, str, list[str]] | None = None
        for text, terms in self._windows_of(source):
            missing = [t for t in restated if not _holds(terms, t)]
            if page is not None and _ROW not in text:
                missing = [t for t in missing if t not in unsaid or not _holds(page, t)]
            missing += [u for u in units if not _has_unit(terms, u)]
            found_new = sum(terms.has(t) for t in new)
            # figures and names are never paraphrased: each must be written in the window
            written = all(terms.has(t) for t in new if _is_figure(t)) and all(terms.has(n) for n in named)
            negation_ok = not negative or bool(_NEGATION.search(text))
            held = not missing and written and negation_ok and (not new or found_new / len(new) >= 0.5)
            if held and answers and not self._in_one_sentence(text, terms, source.title, said, new):
                # the answer's words in one sentence and the question's in the other ("保险公司表示…。
                # …鑫诺卫星通信有限公司表示…" is no "鑫诺 is an insurance company"): the judge reads it
                across = (found_new + len(restated), text, [ACROSS])
                best = across if best is None or across[0] >= best[0] else best
                continue
            if held:
                return Verdict(True, "words", text)
            rank = found_new + len(restated) - len(missing) + (0.5 if written else 0.0)
            if best is None or rank > best[0]:
                best = (rank, text, missing if negation_ok else [*missing, "(negation)"])
        if best is None:
            return Verdict(False, "", "", [*restated, *units])
        return Verdict(False, "", best[1], best[2])

    def settle(self, sentence: str, source: Strip, *, judge: Judge | None, answers: bool = False) -> Verdict:
        """:meth:`lexical`, then the judge for a claim whose words no window holds.

        A relation word the source never writes although it is in the source's language (a
        page that never says "CEO" read as naming one) needs the judge's near-certainty
        (``STRICT``): small models read a founder as the chief executive."""
        answers = answers and judge is not None  # without a reader, what a claim says is checked, not what it answers
        verdict = self.lexical(sentence, source, answers=answers)
        if verdict.held or not verdict.window:
            return verdict
        if self.closed and negative_reply(sentence):
            return verdict  # a "no" must be written in the source: never inferred
        restated, new, units = self.needs(sentence, answers=answers)
        window = SourceTerms(verdict.window)
        unnamed = [n for n in self.names(sentence) if not window.has(n)]
        if unnamed or any(_is_figure(t) and not window.has(t) for t in new):
            return verdict  # a figure or a name the window lacks: no reading makes it stated there
        if any(t in verdict.missing for t in self.figures):
            return verdict  # the asked year or figure is not in the window: another event's slot
        if any(u in verdict.missing for u in units):
            return verdict  # a unit the figure's window lacks measures something else ("8,640 mAh" of a count)
        if judge is None:
            # No model to read paraphrases: the relation's words must at least be in the source.
            whole = SourceTerms(f"{source.title} {source.text}")
            absent = [t for t in restated if not _holds(whole, t)]
            return Verdict(not absent, "relation" if not absent else "", verdict.window, absent)
        p = judge(self.question, verdict.window)
        if p is None:  # the judge could not be asked (no logprobs, an error): as if there were none
            return self.settle(sentence, source, judge=None)
        whole = SourceTerms(f"{source.title} {source.text}")
        zh = detect_language(source.text[:300]) == "zh"
        unwritten = [
            t for t in verdict.missing if t in restated and bool(_CJK.search(t)) == zh and not _holds(whole, t)
        ]
        bar = max(self.threshold, STRICT) if unwritten else self.threshold
        if p >= bar and verdict.missing == [ACROSS]:
            # Read as the question, two sentences side by side pass for an answer ("保险公司表示…。
            # …鑫诺…表示…" read 0.73 for "what kind of company is 鑫诺"): the claim itself must be
            # stated, near-certainly (the claims stated in one such window read 0.99).
            stated = judge(self.question, verdict.window, claim=sentence)
            if stated is not None and stated < ENTAILS:
                return Verdict(False, "judge", verdict.window, verdict.missing, round(stated, 4))
        return Verdict(p >= bar, "judge", verdict.window, verdict.missing, round(p, 4))

    def names(self, sentence: str) -> list[str]:
        """The people's names (Chinese) and proper nouns (English, capitalised inside the sentence)
        a claim brings that the question does not hold, lower case. Like a figure, a name must be
        written in the window that states the claim: half the claim's words are not enough when
        one of four named people is made up ("倪匡、黄霑、刘国勋、金庸")."""
        asked = self.question.lower()
        if _CJK.search(sentence):
            found = [w for w, tag in zh_pos(sentence) if tag in _ZH_PERSON and len(w) >= 2]
        else:
            parts = (w for m in _EN_PROPER.finditer(sentence) for w in m.group(0).split("-"))
            found = [w for w in parts if w.lower() not in EN_STOP and w.lower() not in _CALENDAR]
        return [w.lower() for w in dict.fromkeys(found) if w.lower() not in asked]

    @staticmethod
    def _in_one_sentence(window: str, terms: SourceTerms, title: str, restated: list[str], new: list[str]) -> bool:
        """Whether one sentence of a two-sentence ``window`` (its ``terms``), read under its title,
        holds the claim's relation words and the new words the window holds: the sentence that
        answers states its relation in one sentence, not by two that sit side by side."""
        head = f"{title}: " if title else ""
        body = window.removeprefix(head)
        parts = split_sentences(body)
        if len(parts) < 2 or _ROW in body:
            return True
        found = [t for t in new if terms.has(t)]
        for part in parts:
            terms = SourceTerms(head + part)
            if all(_holds(terms, t) for t in restated) and all(terms.has(t) for t in found):
                return True
        return False

    def _windows_of(self, source: Strip) -> list[tuple[str, SourceTerms]]:
        key = source.title + "\x00" + source.text
        if key not in self._windows:
            self._windows[key] = [(w, SourceTerms(w)) for w in windows(source)]
        return self._windows[key]


def judge_threshold(model_id: str, configured: float | None) -> float | None:
    """The configured threshold, else the bundled model's calibrated one (None: no judge).

    >>> judge_threshold("qwen2.5-coder-1.5b", None), judge_threshold("my-model", None), judge_threshold("m", 0.6)
    (0.6, None, 0.6)
    """
    if configured is not None:
        return configured
    return CALIBRATED.get(model_id.removeprefix("openai:"))


def model_judge(llm: LLM, lang: str) -> Judge | None:
    """A judge reading P(yes) from ``llm`` (None when it gives no token probabilities).

    It asks what the Correct-path check asks of a whole context — does this passage state
    the answer to the question? — of one window; an LLM error is None (the lexical verdict
    stands), never a failed answer.
    """
    if not offers(llm, YesNoLLM):
        return None
    assert isinstance(llm, YesNoLLM)  # offers() said so (a guard implements every method)

    def judge(question: str, passage: str, claim: str | None = None) -> float | None:
        asked = verify_messages(question, [passage], lang) if claim is None else claim_messages(claim, passage, lang)
        try:
            return float(llm.yes_probability(asked))
        except CragError:
            return None

    return judge


def windows(source: Strip) -> list[str]:
    """Each sentence of ``source`` with the one before it, under the source's title; a table
    row (``key | column: value | …``, as ingest writes tables) gives one window per cell, with
    its key and the line that introduces the table: a figure is read with its own headers only.

    >>> windows(Strip("It opened in 1901. It has a café.", "a", "web", "Museum"))
    ['Museum: It opened in 1901.', 'Museum: It opened in 1901. It has a café.']
    >>> windows(Strip("Shipments by quarter.\\n\\nYunque S5 | Q2 2023: 6,120 | Q3 2023: 8,640", "t", "internal"))[1:]
    ['Shipments by quarter. Yunque S5 | Q2 2023: 6,120', 'Shipments by quarter. Yunque S5 | Q3 2023: 8,640']
    """
    sentences = [s for line in source.text.splitlines() for s in split_sentences(line)] or [source.text]
    head = f"{source.title}: " if source.title else ""
    out = []
    lead = ""  # the last line that is not a row: what the table's rows are about
    for i, sentence in enumerate(sentences):
        if _ROW in sentence:
            key, *cells = sentence.split(_ROW)
            out += [(head + f"{lead} {key}{_ROW}{cell}".strip())[:WINDOW_CHARS] for cell in cells]
            continue
        lead = sentence if len(sentence) <= _LEAD_CHARS else ""
        text = sentence if i == 0 or _ROW in sentences[i - 1] else f"{sentences[i - 1]} {sentence}"
        out.append((head + text)[:WINDOW_CHARS])
    return out


def negative_reply(sentence: str) -> bool:
    """A reply that says no ("No, …", "… does not …", "不…", "没有…").

    >>> negative_reply("No, it does not [1]."), negative_reply("不提供公司车。"), negative_reply("Yes [1].")
    (True, True, False)
    """
    return bool(_NEGATIVE.search(sentence))


def missing_terms(question: str, sources: list[Strip]) -> list[str]:
    """The question's words that no source holds, as the question writes them ("CEO", 公司车).

    >>> missing_terms("Who is the CEO of Kestrel Labs?", [Strip("Kestrel Labs sells phones.", "a", "internal")])
    ['CEO']
    """
    every = SourceTerms(" ".join(f"{s.title} {s.text}" for s in sources))
    out = []
    for term in new_terms(question, ""):
        if _is_figure(term) or term in _LIGHT or _holds(every, term):
            continue
        match = re.search(re.escape(term), question, re.I)
        out.append(match.group(0) if match else term)
    return out


def _units(sentence: str) -> list[str]:
    """The known units written after the sentence's figures, lower case ("mah", "毫安时").

    >>> _units("It holds 8,640 mAh and weighs 185克; 3 个 ports, 10天年假.")
    ['mah', '克']
    """
    out: list[str] = []
    for m in _FIGURE_UNIT.finditer(symbol_units(sentence)):
        word = (m.group(1) or "").lower()
        # a Chinese unit runs into the next word ("5200毫安时左右"): its longest known start
        unit = next((word[:n] for n in (3, 2, 1) if word[:n] in UNITS), "") if word and not word.isascii() else word
        if unit in UNITS and unit not in out:
            out.append(unit)
    return out


def _holds(terms: SourceTerms, term: str) -> bool:
    """``terms.has(term)``; a Chinese word also without the particles jieba glued to it
    ("往来于" is held by "往来彩虹与机场之间")."""
    if terms.has(term) or (term.isascii() and term.isalpha() and (terms.has(term + "s") or terms.has(term + "es"))):
        return True  # "car" in "cars": the light stemmer leaves short words as they are
    if any(terms.has(form) for form in _IRREGULAR.get(term, ()) + synonyms(term)):
        return True  # "win" in "won" (no stemmer joins an irregular verb's forms), 成立 in 创办
    if term.isascii() and len(term) > 2 and _has_unit(terms, term.removesuffix("s")):
        return True  # "degrees Celsius" in "565 °C", "kilograms" in "公斤"
    if term.isascii() and term.isalpha() and _derived(terms, term):
        return True  # "confusion" in "confused", "director" in "directed"
    glued = _GLUED.fullmatch(term)
    if glued:  # jieba writes "2021年" as one word and "2021 年" as two
        return terms.has(glued.group(1)) and glued.group(2) in terms.corpus
    if len(term) >= 3 and term[0] in "该此这" and _CJK.fullmatch(term[1]) and terms.has(term[1:]):
        return True  # "该雅芳河": jieba glues the demonstrative to the name it points at
    core = term.strip(_ZH_PARTICLES)
    if core and core != term and _CJK.fullmatch(core[0]) and len(core) < 2:
        return core in terms.corpus  # the end of a name jieba glued to 的 ("柯文淑的" → 柯文 + 淑的)
    return len(core) >= 2 and core != term and terms.has(core)


def _derived(terms: SourceTerms, term: str) -> bool:
    """A source word of the same English root: ``term`` less its derivational ending (≥ 5
    letters left) begins a word of the source. The light stemmer strips only inflections."""
    low = term.lower()
    for suffix in _DERIVATIONAL:
        if low.endswith(suffix) and len(low) - len(suffix) >= 5:
            return bool(re.search(rf"\b{low[: -len(suffix)]}[a-z]*", terms.corpus))
    return False


def _has_unit(terms: SourceTerms, unit: str) -> bool:
    return any(_unit_form(form).search(terms.corpus) for form in UNITS.get(unit, (unit,)))


@lru_cache(maxsize=256)
def _unit_form(form: str) -> re.Pattern[str]:
    """A Latin unit starts a word ("gram" is not in "kilograms"); a one- or two-letter one
    ("g", "km") also ends it, a number may stand before it ("185g")."""
    if not (form.isascii() and form.isalpha()):
        return re.compile(re.escape(form))
    return re.compile(rf"(?<![a-z]){form}" + (r"(?![a-z])" if len(form) <= 2 else ""))


def _is_figure(term: str) -> bool:
    return bool(re.fullmatch(r"\d+(?:\.\d+)?", term))
