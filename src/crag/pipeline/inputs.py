"""The checks of a question and its conversation before a run: one clear line for bad input.

>>> check_question("  What is CRAG? ")
'What is CRAG?'
>>> check_history([{"role": "user", "content": "Hi"}])
[{'role': 'user', 'content': 'Hi'}]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from crag.correct.condense import history_turns
from crag.errors import InputError
from crag.text import scrub_surrogates

__all__ = ["MAX_QUESTION_CHARS", "check_history", "check_question"]

MAX_QUESTION_CHARS = 4000


def check_question(question: str) -> str:
    """The question as it will be asked (lone surrogates replaced); ``InputError`` for a bad one."""
    if not isinstance(question, str) or not question.strip():
        raise InputError('the question is empty; ask something, e.g. crag ask "What is CRAG?"')
    # Lone surrogates cannot be encoded (embedder, SQLite, output); keep the rest of the text.
    q = str(scrub_surrogates(question)).strip()
    if not q.replace("\ufffd", "").strip():
        raise InputError("the question has no readable text (only undecodable characters); pass UTF-8 text")
    if len(q) > MAX_QUESTION_CHARS:
        raise InputError(
            f"the question is {len(q):,} characters; the limit is {MAX_QUESTION_CHARS:,}: shorten it "
            "or ingest the long text as a document"
        )
    if "\x00" in q:
        raise InputError("the question contains NUL bytes; pass plain text")
    return q


def check_history(history: Sequence[Mapping[str, Any]] | None) -> list[dict[str, str]]:
    """The conversation's user and assistant messages as plain text; ``InputError`` for a bad one."""
    if history is not None and (isinstance(history, (str, bytes, Mapping)) or not isinstance(history, Sequence)):
        raise InputError('history must be a list of messages like {"role": "user", "content": "..."}')
    return [{"role": role, "content": str(scrub_surrogates(text))} for role, text in history_turns(history)]
