"""Answer generation from the corrected context, with numbered citations.

The generator answers in the question's language, cites ``[n]`` for the context item
it used, and says plainly when the context does not hold the answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from crag.correct.fuse import tag
from crag.protocols import LLM, Completion
from crag.text import detect_language, join_sentences, split_sentences
from crag.types import Citation, Strip

SYSTEM = {
    "en": (
        "You are a careful question-answering assistant. Answer only from the numbered sources. "
        "Write a short answer in complete sentences and put the source number in square brackets "
        "after each fact, like [1]. If the sources disagree, give both views with their numbers. "
        "If the sources do not contain the answer, say: The provided sources do not contain the answer."
    ),
    "zh": (
        "你是一个严谨的问答助手。只根据给出的编号资料回答。用简短完整的中文句子作答，"
        "并在每个事实后用方括号标注资料编号，例如[1]。如果资料之间说法矛盾，请同时给出两种说法及其编号。"
        "如果资料中没有答案，就说：提供的资料中没有找到答案。"
    ),
}

NO_CONTEXT = {
    "en": "I could not find a reliable answer: no relevant sources were found for this question.",
    "zh": "未能找到可靠的答案：没有找到与该问题相关的资料。",
}

_CITE = re.compile(r"\[(\d{1,3})\]")


def build_messages(
    question: str, context: Sequence[Strip], lang: str, extra_instruction: str = ""
) -> list[dict[str, str]]:
    """Chat messages: instructions, then numbered sources with their origin tag, then the question.

    The "Source [n] [tag] title:" layout matters for small models: a bare "[1] text"
    list tempts them to copy the list back instead of answering.
    """
    word, q_label, colon = ("资料", "问题", "：") if lang == "zh" else ("Source", "Question", ": ")
    lines = []
    for n, s in enumerate(context, 1):
        title = f" {s.title}" if s.title else ""
        lines.append(f"{word} [{n}] {tag(s, lang)}{title}{colon}{s.text}")
    user = "\n\n".join(lines) + f"\n\n{q_label}{colon}{question}"
    system = SYSTEM[lang] + (f" {extra_instruction}" if extra_instruction else "")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def generate(
    question: str,
    context: Sequence[Strip],
    llm: LLM,
    *,
    max_tokens: int = 384,
    temperature: float = 0.0,
    extra_instruction: str = "",
) -> tuple[str, list[Citation], Completion | None]:
    """Return (answer text, citations actually used, the raw completion)."""
    lang = detect_language(question)
    if not context:
        return NO_CONTEXT[lang], [], None
    out = llm.complete(build_messages(question, context, lang), max_tokens=max_tokens, temperature=temperature)
    answer = out.text.strip()
    if not _CITE.search(answer) and not is_refusal(answer):
        # Small models often state the fact but forget the marker: cite the strip
        # that supports each sentence best, so every answer stays traceable.
        answer = attach_citations(answer, context)
    return answer, citations_for(answer, context), out


def is_refusal(answer: str) -> bool:
    """True when the answer says the sources do not hold the answer."""
    low = answer.lower()
    markers = ("do not contain the answer", "could not find a reliable answer", "没有找到答案", "未能找到可靠的答案",
               "没能找到可靠的答案")
    return any(m in low for m in markers)


def attach_citations(answer: str, context: Sequence[Strip], min_overlap: float = 0.3) -> str:
    """Append ``[n]`` to each answer sentence whose trigrams overlap a context strip enough."""
    grams = [_trigrams(s.text) for s in context]
    out = []
    for sent in split_sentences(answer) or [answer]:
        g = _trigrams(sent)
        best, score = 0, 0.0
        for n, cg in enumerate(grams, 1):
            ov = len(g & cg) / len(g) if g else 0.0
            if ov > score:
                best, score = n, ov
        if best and score >= min_overlap:
            body = sent.rstrip("。.!！?？")
            end = sent[len(body) :]
            sent = f"{body}[{best}]{end}" if end else f"{sent}[{best}]"
        out.append(sent)
    return join_sentences(out)


def _trigrams(text: str) -> set[str]:
    t = re.sub(r"\s+", " ", text.lower())
    return {t[i : i + 3] for i in range(max(0, len(t) - 2))}


def citations_for(answer: str, context: Sequence[Strip]) -> list[Citation]:
    """Citations for the ``[n]`` markers in the answer that point at real context items."""
    used = sorted({int(m) for m in _CITE.findall(answer) if 1 <= int(m) <= len(context)})
    return [
        Citation(n, context[n - 1].source, context[n - 1].title, context[n - 1].url, context[n - 1].text) for n in used
    ]


def question_language(question: str) -> str:
    return detect_language(question)
