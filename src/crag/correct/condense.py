"""Conversations: the last question, made standalone from the turns before it.

A chat front end sends the whole conversation. "Who designed it?", asked after a
question about a lighthouse, cannot be retrieved or graded as it stands, so the
history is *condensed* into one standalone question in the question's language, with
pronouns and ellipsis resolved. That question is what the pipeline retrieves, grades
and answers; the trace keeps both.

Cost: no history, no call. A follow-up that already names what it is about (no
pronoun, no ellipsis, a name of its own) is kept as asked, with no call either;
otherwise the LLM is asked once. A small model's rewrite is checked before it is
trusted: one line, a question, in the question's language, keeping the question's
own words and naming something from the conversation when the question pointed back.
A rewrite that fails the check (or an LLM that fails) is replaced by the question with
the conversation's topic put in for its pronoun, and the reason is recorded.

>>> history = [{"role": "user", "content": "When was the Bell Rock Lighthouse built?"},
...            {"role": "assistant", "content": "Between 1807 and 1810 [1]."}]
>>> condense("Who designed it?", [], llm=None).question      # a first turn: no call
'Who designed it?'
>>> c = condense("Who designed it?", history, llm=None)    # no model: the fallback
>>> c.question, c.method
('Who designed Bell Rock Lighthouse?', 'fallback')
>>> check_rewrite("Who designed the Bell Rock Lighthouse?", "Who designed it?", history_turns(history))
''
>>> check_rewrite("Robert Stevenson designed it.", "Who designed it?", history_turns(history))
'not a question'
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from crag.errors import InputError, LLMError
from crag.protocols import LLM
from crag.text import EN_STOP, detect_language, keywords, zh_cut, zh_pos

__all__ = ["Condensed", "check_rewrite", "condense", "history_turns", "needs_context", "person_of", "topic_of"]

MAX_TURNS = 6  # the most recent messages the model reads: follow-ups point at the last few
MAX_MESSAGE_CHARS = 300  # of each; an assistant's long answer names its subject early
MAX_TOKENS = 64  # a question is short; a model that goes on is answering instead

_SYSTEM = {
    "en": "You rewrite the last question of a conversation so that it can be understood without the "
    "conversation. You never answer it.",
    "zh": "你负责改写对话中的最后一个问题，使它脱离对话也能看懂。你从不回答问题。",
}
_INSTRUCTION = {
    "en": "Conversation:\n{history}\nFollow-up question: {question}\n\n"
    "Rewrite the follow-up question as one standalone question in English: replace pronouns "
    "(it, he, she, they, its, this) with the names they stand for and add what it leaves out. "
    "Keep its other words. Reply with the question only.",
    "zh": "对话：\n{history}\n后续问题：{question}\n\n"
    "把后续问题改写成一个可以独立理解的中文问题：把代词（它、他、她、其、该、这）换成所指的名称，"
    "补全省略的部分，其余用词保持不变。只回复改写后的问题。",
}
# Worked examples as prior exchanges (a pronoun, then an ellipsis): a 1.5B model follows a
# shown pattern far better than a described one. The first Chinese one is the issue's own.
_EXAMPLES = {
    "en": [  # an ellipsis example made the 1.5B model copy English follow-ups unchanged more often
        ([("user", "When was the Bell Rock Lighthouse built?"), ("assistant", "Between 1807 and 1810.")],
         "Who designed it?", "Who designed the Bell Rock Lighthouse?"),
    ],
    "zh": [
        ([("user", "京张铁路是什么时候开工的？"), ("assistant", "京张铁路于1905年开工。")],
         "它哪一年全线通车？", "京张铁路哪一年全线通车？"),
        ([("user", "北京的常住人口是多少？"), ("assistant", "约2189万人。")],
         "那上海呢？", "上海的常住人口是多少？"),
    ],
}  # fmt: skip
_SPEAKER = {"en": {"user": "User", "assistant": "Assistant"}, "zh": {"user": "用户", "assistant": "助手"}}

# Words that point back into the conversation. "that" and "there" are left out: "the law
# that..." and "is there..." are standalone.
_EN_POINTERS = frozenset("it its itself he him his she her hers they them their theirs this these those".split())
_EN_ELLIPSIS = re.compile(r"^\s*(?:and|also|what about|how about|what else|why|how so|which one)\b", re.I)
_ZH_POINTERS = ("它", "他", "她", "其", "该", "这", "那", "此", "上述", "前者", "后者")
_ZH_ELLIPSIS = re.compile(r"^\s*(?:那|还有|另外|以及|和|跟)|呢\s*[？?]?\s*$")
_EN_TOPIC = re.compile(r"[A-Z][\w'’.-]*(?:\s+(?:(?:of|the|and|de|von|van|du|la)\s+)*[A-Z][\w'’.-]*)*")
_EN_QUESTION_WORDS = frozenset("what who whom whose which when where why how is are was were do does did can could "
                               "would will should has have had in on at for from by to".split())  # fmt: skip
# jieba tags that may form the subject a Chinese question opens with (nouns, names, places,
# abbreviations, Latin words, numerals of chemical names) and the name separator "·".
_ZH_SUBJECT_TAGS = ("n", "j", "eng", "m")
_ZH_QUESTION = re.compile(r"什么|哪|谁|几|多少|多久|多大|如何|怎么|怎样|为什么|为何|是否|吗|呢|何")
_LABEL = re.compile(
    r"^\s*(?:standalone question|rewritten question|question|rewrite|独立问题|改写后的问题|问题)\s*[:：]\s*", re.I
)
_SOURCES = re.compile(r"\n\s*(?:Sources|来源)\s*[:：].*\Z", re.S)
_MARKER = re.compile(r"\s*\[\d+(?:\s*[,，]\s*\d+)*\]")


@dataclass
class Condensed:
    """The condense step's value: the question as asked and the one the pipeline runs.

    ``method``: ``llm`` (the model's rewrite passed the check), ``kept`` (already
    standalone, no call), ``fallback`` (the rewrite failed its check or the LLM failed:
    the question with the conversation's topic; ``degradations`` says why).
    """

    asked: str
    question: str
    history: int  # earlier messages (user and assistant) it was condensed from
    method: str
    llm_calls: int = 0
    rewrite: str = ""  # the model's reply, as written (kept when it was rejected, for the trace)
    degradations: list[str] = field(default_factory=list)


def history_turns(history: Sequence[Mapping[str, Any]] | None) -> list[tuple[str, str]]:
    """``(role, text)`` of the user and assistant messages, in order; others dropped.

    Assistant text loses its citation markers and a trailing ``Sources:`` list (what crag's
    own chat replies carry): they name no subject. Raises ``InputError`` for a malformed
    message.

    >>> history_turns([{"role": "system", "content": "Be brief."},
    ...                {"role": "assistant", "content": "1816 [1].\\n\\nSources:\\n[1] Warsaw"}])
    [('assistant', '1816.')]
    """
    turns: list[tuple[str, str]] = []
    for i, message in enumerate(history or []):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise InputError(f'history[{i}] is not a message; pass {{"role": "user"|"assistant", "content": "..."}}')
        content = message.get("content")
        if not isinstance(content, str):
            raise InputError(f"history[{i}].content must be text, got {type(content).__name__}")
        role = message["role"]
        if role not in ("user", "assistant") or not content.strip():
            continue  # system prompts, tool results: not the conversation's subject
        text = content.strip()
        if role == "assistant":
            text = _MARKER.sub("", _SOURCES.sub("", text)).strip()
        turns.append((role, text))
    return turns


def condense(
    question: str, history: Sequence[Mapping[str, Any]] | None, llm: LLM | None, *, max_tokens: int = MAX_TOKENS
) -> Condensed:
    """The standalone form of ``question`` after ``history``: at most one LLM call, none without history.

    ``llm=None`` uses the fallback alone (no model at hand).
    """
    turns = history_turns(history)
    if not any(role == "user" for role, _ in turns):  # a first turn (or only an assistant greeting)
        return Condensed(question, question, len(turns), "kept")
    if not needs_context(question):
        return Condensed(question, question, len(turns), "kept")
    if llm is None:
        return _fallback(question, turns, "", "no LLM to condense with")
    lang = detect_language(question)
    try:
        reply = llm.complete(_messages(question, turns, lang), max_tokens=max_tokens, temperature=0.0).text
    except LLMError as exc:
        return _fallback(question, turns, "", f"the LLM failed ({exc})", calls=1)
    rewrite = _clean(reply, question)
    problem = check_rewrite(rewrite, question, turns)
    if problem:
        return _fallback(question, turns, reply, problem, calls=1)
    return Condensed(question, rewrite, len(turns), "llm", 1, reply)


def needs_context(question: str) -> bool:
    """Whether ``question`` points back into the conversation or names nothing of its own.

    >>> needs_context("Who designed it?"), needs_context("When was the Royal University of Warsaw established?")
    (True, False)
    >>> needs_context("那雌鱼呢？"), needs_context("天津犹太会堂是什么时候建成的？")
    (True, False)
    """
    if detect_language(question) == "zh":
        if any(p in question for p in _ZH_POINTERS) or _ZH_ELLIPSIS.search(question):
            return True
        return not _zh_subject(question)
    words = re.findall(r"[A-Za-z]+", question)
    if any(w.lower() in _EN_POINTERS for w in words) or _EN_ELLIPSIS.search(question) or len(words) <= 2:
        return True
    return not _en_names(question)


def check_rewrite(rewrite: str, question: str, turns: Sequence[tuple[str, str]]) -> str:
    """Why the model's ``rewrite`` of ``question`` after ``turns`` (:func:`history_turns`) cannot be used.

    "" when it can: one question, in the question's language, that keeps most of the
    question's own words and names something from the conversation, adding little else.
    """
    said = " ".join(text for _, text in turns).lower()
    if not rewrite:
        return "empty"
    if len(rewrite) > 3 * len(question) + 120:
        return "too long for a question"
    lang = detect_language(question)
    if detect_language(rewrite) != lang:
        return "not in the question's language"
    if not _is_question(rewrite, lang):
        return "not a question"
    low = rewrite.lower()
    own = _own_words(question)
    if own and sum(_has(low, w) for w in own) * 3 < len(own) * 2:
        return "drops the question's own words"
    names = [w for w in _content_words(rewrite) if not _has(question.lower(), w)]
    if not any(_has(said, w) for w in names):
        return "names nothing from the conversation"
    invented = [w for w in names if not _has(said, w)]
    if len(invented) > 2:
        return "adds words from neither the question nor the conversation: " + ", ".join(invented[:4])
    return ""


def topic_of(turns: Sequence[tuple[str, str]]) -> str:
    """What the conversation is about: the subject of the latest user message that names one.

    >>> topic_of([("user", "天津犹太会堂是什么时候开始筹建的？")])
    '天津犹太会堂'
    >>> topic_of([("user", "Which governor of Virginia invested in the Ohio Company?")])
    'Virginia'
    >>> topic_of([("user", "What is the worst-case running time of quicksort?")])
    'quicksort'
    """
    for role, text in reversed(turns):
        if role != "user":
            continue
        if detect_language(text) == "zh":
            subject = _zh_subject(text)
        else:
            names = _en_names(text)
            of = re.search(r"\bof\s+(?:the\s+)?([\w' -]+?)\s*\?*$", text)
            subject = names[0] if names else of.group(1) if of else ""
        if subject:
            return subject
    users = [text for role, text in turns if role == "user"]
    return " ".join(keywords(users[-1], limit=4)) if users else ""


def person_of(turns: Sequence[tuple[str, str]], question: str) -> str:
    """The first name of a person in the latest answer that the question does not name ("" if none).

    "Whom did he order...?" after "Robert Dinwiddie [1]." means Dinwiddie, not the topic.

    >>> person_of([("user", "Who founded it?"), ("assistant", "It was founded by Robert Dinwiddie.")], "Did he?")
    'Robert Dinwiddie'
    """
    answer = next((text for role, text in reversed(turns) if role == "assistant"), "")
    if detect_language(answer) == "zh":
        names = [w for w, flag in zh_pos(answer) if flag.startswith("nr") and len(w) >= 2]
    else:
        names = _en_names(answer)
    return next((n for n in names if n.lower() not in question.lower()), "")


# -- the prompt ----------------------------------------------------------------------------
def _messages(question: str, turns: Sequence[tuple[str, str]], lang: str) -> list[dict[str, str]]:
    def ask(shown: Sequence[tuple[str, str]], asked: str) -> dict[str, str]:
        return {"role": "user", "content": _INSTRUCTION[lang].format(history=_transcript(shown, lang), question=asked)}

    messages = [{"role": "system", "content": _SYSTEM[lang]}]
    for shown, asked, rewrite in _EXAMPLES[lang]:
        messages += [ask(shown, asked), {"role": "assistant", "content": rewrite}]
    return [*messages, ask(turns, question)]


def _transcript(turns: Sequence[tuple[str, str]], lang: str) -> str:
    names = _SPEAKER[lang]
    lines = []
    for role, text in list(turns)[-MAX_TURNS:]:
        one_line = " ".join(text.split())
        if len(one_line) > MAX_MESSAGE_CHARS:
            one_line = one_line[:MAX_MESSAGE_CHARS] + "…"
        lines.append(f"{names[role]}: {one_line}")
    return "\n".join(lines)


def _clean(reply: str, question: str) -> str:
    """The first line of the reply without labels and quotes, with the question mark the question had."""
    line = next((ln for ln in reply.strip().splitlines() if ln.strip()), "")
    line = _LABEL.sub("", line).strip().strip("\"'“”「」").strip()
    if line and line[-1] not in "?？" and question.rstrip()[-1:] in ("?", "？") and _is_question(line + "?", ""):
        line += "？" if detect_language(line) == "zh" else "?"
    return line


# -- checks and the fallback -------------------------------------------------------------------
def _is_question(text: str, lang: str) -> bool:
    if text.rstrip()[-1:] not in ("?", "？"):
        return False
    if (lang or detect_language(text)) == "zh":
        return bool(_ZH_QUESTION.search(text))
    first = re.findall(r"[A-Za-z]+", text)[:1]
    return bool(first) and first[0].lower() in _EN_QUESTION_WORDS


def _own_words(question: str) -> list[str]:
    """The question's content words a rewrite must keep: no pronouns, no question words (哪一年)."""
    words = [w.lstrip("那这它他她其该此") for w in _content_words(question) if w not in _EN_POINTERS]
    return [w for w in words if w and not _ZH_QUESTION.search(w)]


def _content_words(text: str) -> list[str]:
    return [w.lower() for w in keywords(text, limit=12)]


def _has(text: str, word: str) -> bool:
    """``word`` in ``text``, an English word by its first five letters (designed ~ design)."""
    return (word[:5] if word.isascii() and len(word) > 5 else word) in text


def _fallback(question: str, turns: Sequence[tuple[str, str]], reply: str, why: str, *, calls: int = 0) -> Condensed:
    topic = topic_of(turns)
    standalone = _fill_ellipsis(question, turns) or (
        _put_topic(question, topic, person_of(turns, question)) if topic else question
    )
    note = f"condense: {why}; searched the question with the conversation's topic ({topic or 'none found'})"
    return Condensed(question, standalone, len(turns), "fallback", calls, reply, [note])


_ZH_ONLY_NAMED = re.compile(r"^\s*(?:那么|那|还有)?\s*(.{1,20}?)\s*呢\s*[？?]?\s*$")
_EN_ONLY_NAMED = re.compile(r"^\s*(?:and|what about|how about)\s+(.{1,80}?)\s*\?\s*$", re.I)


def _fill_ellipsis(question: str, turns: Sequence[tuple[str, str]]) -> str:
    """ "那雌鱼呢？" after "北斗阿南鱼的雄鱼是什么颜色？": the last question with the new term in ("" if not that form).

    The term takes the place of the last question's word it shares most characters with
    (雄鱼 for 雌鱼), else of that question's subject (北京 for 上海).

    >>> _fill_ellipsis("那雌鱼呢？", [("user", "北斗阿南鱼的雄鱼是什么颜色？")])
    '北斗阿南鱼的雌鱼是什么颜色？'
    >>> _fill_ellipsis("And the Statue of Liberty?", [("user", "How tall is the Eiffel Tower?")])
    'How tall is the Statue of Liberty?'
    """
    last = next((text for role, text in reversed(turns) if role == "user"), "")
    zh = detect_language(question) == "zh"
    m = (_ZH_ONLY_NAMED if zh else _EN_ONLY_NAMED).match(question)
    if not last or not m or (detect_language(last) == "zh") != zh:
        return ""
    term = m.group(1)
    if zh:
        words = [w for w in zh_cut(last) if len(w) >= 2 and not _ZH_QUESTION.search(w)]
        shared = max(words, key=lambda w: (len(set(w) & set(term)), len(w)), default="")
        old = shared if shared and set(shared) & set(term) else _zh_subject(last)
    else:
        names = _en_names(last)
        old = names[0] if names else ""
        if old and term.lower().startswith("the ") and f"the {old}" in last:
            old = f"the {old}"
    return last.replace(old, term, 1) if old and old != term else ""


def _put_topic(question: str, topic: str, person: str = "") -> str:
    """The topic in place of the question's first pronoun (a person's name for he/she), else in front."""
    if topic.lower() in question.lower():
        return question
    if detect_language(question) == "zh":
        for pronoun in ("它们", "他们", "她们", "它", "他", "她", "其", "该"):
            if pronoun in question:
                return question.replace(pronoun, person if person and pronoun in "他她" else topic, 1)
        return f"关于{topic}：{question}"
    question = re.sub(r"^\s*(?:and|also)\s+(\w)", lambda m: m.group(1).upper(), question, flags=re.I)
    who = person or topic
    for pattern, repl in (
        (r"\b(?:he|she|him)\b", who), (r"\b(?:his|her)\b", f"{who}'s"),
        (r"\b(?:its|their)\b", f"{topic}'s"), (r"\b(?:it|them|they)\b", topic),
    ):  # fmt: skip
        replaced, n = re.subn(pattern, repl, question, count=1, flags=re.I)
        if n:
            return replaced
    return f"About {topic}: {question}"


def _en_names(text: str) -> list[str]:
    """Capitalised runs ("Royal University of Warsaw"), not counting a capital that only starts the sentence."""
    names = []
    for m in _EN_TOPIC.finditer(text):
        words = m.group(0).split()
        while words and (words[0].lower() in EN_STOP or words[0].lower() in _EN_QUESTION_WORDS):
            words = words[1:]  # a capital that starts a sentence ("It was", "Which")
        if words:
            names.append(" ".join(words).rstrip(".'’-"))
    return names


def _zh_subject(text: str) -> str:
    """The noun phrase a Chinese question opens with (天津犹太会堂, 侯活·韦比), or "" for none."""
    subject = ""
    for word, flag in zh_pos(text.strip()):  # the shared dictionary, loaded quietly on first Chinese use
        if flag.startswith(_ZH_SUBJECT_TAGS) or (word == "·" and subject):
            subject += word
            continue
        break
    return subject if len(subject) >= 2 and not _ZH_QUESTION.fullmatch(subject) else ""
