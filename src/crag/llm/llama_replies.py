"""llama-cpp-python's replies read as crag's values: a whole reply, a streamed chunk, a stream read out.

>>> completion_of({"choices": [{"text": " Hi! "}], "usage": {"prompt_tokens": 9}}, "m")
Completion(text='Hi!', prompt_tokens=9, completion_tokens=0, model='m')
>>> chunk_delta({"choices": [{"text": "Hi"}]}), chunk_delta({"choices": [{"finish_reason": "stop"}]})
('Hi', '')
"""

from __future__ import annotations

from typing import Any

from crag.errors import LLMError
from crag.protocols import Completion

__all__ = ["BACKEND_ID", "chunk_delta", "completion_of"]

BACKEND_ID = "llama-cpp"  # the embedded model's backend id (crag.llm.llama_cpp)


def completion_of(out: Any, model_id: str) -> Completion:
    """The :class:`Completion` of a whole ``text_completion`` reply."""
    try:
        text = out["choices"][0].get("text") or ""
        usage = out.get("usage") or {}
    except (KeyError, IndexError, TypeError, AttributeError):
        raise LLMError(
            f"{BACKEND_ID}: unexpected completion format from llama-cpp-python",
            backend_id=BACKEND_ID,
            step="complete",
        ) from None
    return Completion(
        text=text.strip(),
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        completion_tokens=int(usage.get("completion_tokens", 0)),
        model=model_id,
    )


def chunk_delta(chunk: Any) -> str:
    """The text of one streamed ``text_completion`` chunk ("" for the finish chunk)."""
    try:
        return str(chunk["choices"][0].get("text") or "")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise LLMError(
            f"{BACKEND_ID}: unexpected stream chunk format from llama-cpp-python", backend_id=BACKEND_ID, step="stream"
        ) from None
