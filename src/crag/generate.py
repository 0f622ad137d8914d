"""Answer generation from the corrected context, with numbered citations.

The generator answers in the question's language, cites ``[n]`` for the context item
it used, and says plainly when the context does not hold the answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from crag.correct.fuse import tag
from crag.protocols import LLM, Completion
from crag.text import detect_language
from crag.types import Citation, Strip

SYSTEM = {
    "en": (
        "You answer questions using only the numbered context passages provided. "
        "Cite the passages you use like [1] or [2] right after the statement they support. "
        "If the context does not contain the answer, say \"The provided sources do not contain the answer.\" "
        "and do not guess. When sources disagree, present both views with their citations. "
        "Answer in English, briefly."
    ),
    "zh": (
        "你只能根据给出的带编号的上下文回答问题。在所依据的陈述后用[1]、[2]这样的编号标注引用来源。"
        "如果上下文中没有答案，请直接说“提供的资料中没有找到答案。”，不要猜测。"
        "如果不同来源说法不一致，请同时给出两种说法并标注来源。请用中文简洁作答。"
    ),
}

NO_CONTEXT = {
    "en": "I could not find a reliable answer: no relevant sources were found for this question.",
    "zh": "未能找到可靠的答案：没有找到与该问题相关的资料。",
}

_CITE = re.compile(r"\[(\d{1,3})\]")


def build_messages(question: str, context: Sequence[Strip], lang: str) -> list[dict[str, str]]:
    """Chat messages: instructions, tagged numbered context, then the question."""
    lines = []
    for n, s in enumerate(context, 1):
        title = f" ({s.title})" if s.title else ""
        lines.append(f"[{n}] {tag(s, lang)}{title} {s.text}")
    label_ctx, label_q = ("上下文", "问题") if lang == "zh" else ("Context", "Question")
    user = f"{label_ctx}:\n" + "\n\n".join(lines) + f"\n\n{label_q}: {question}"
    return [{"role": "system", "content": SYSTEM[lang]}, {"role": "user", "content": user}]


def generate(
    question: str, context: Sequence[Strip], llm: LLM, *, max_tokens: int = 384, temperature: float = 0.0
) -> tuple[str, list[Citation], Completion | None]:
    """Return (answer text, citations actually used, the raw completion)."""
    lang = detect_language(question)
    if not context:
        return NO_CONTEXT[lang], [], None
    out = llm.complete(build_messages(question, context, lang), max_tokens=max_tokens, temperature=temperature)
    answer = out.text.strip()
    return answer, citations_for(answer, context), out


def citations_for(answer: str, context: Sequence[Strip]) -> list[Citation]:
    """Citations for the ``[n]`` markers in the answer that point at real context items."""
    used = sorted({int(m) for m in _CITE.findall(answer) if 1 <= int(m) <= len(context)})
    return [
        Citation(n, context[n - 1].source, context[n - 1].title, context[n - 1].url, context[n - 1].text)
        for n in used
    ]


def question_language(question: str) -> str:
    return detect_language(question)
