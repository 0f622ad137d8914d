"""A bundled GGUF behind llama-cpp-python's OpenAI-compatible server, on loopback.

The hosted path (``[llm] backend = "openai"``) measured with the same weights as the
embedded model, so a benchmark can tell what the transport changes from what the
model does.

### Usage example
>>> with serve_gguf("qwen2.5-coder-0.5b") as base:  # doctest: +SKIP
...     OpenAIChatLLM(base, "qwen2.5-coder-0.5b").complete([{"role": "user", "content": "Hi"}])
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from crag.errors import LLMUnavailableError
from crag.llm.models import resolve_gguf
from crag.testing.net import free_port
from crag.testing.processes import stop_group, wait_ready

__all__ = ["serve_gguf"]


@contextmanager
def serve_gguf(model: str, *, n_ctx: int = 4096, ready_seconds: float = 120, log: Path | None = None) -> Iterator[str]:
    """Run ``python -m llama_cpp.server`` for ``model``; yield its ``/v1`` base URL.

    ``model`` is a bundled name or a GGUF path. With ``log``, the server's output goes
    there and its tail is in the error when the server does not come up.
    """
    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(resolve_gguf(model)),
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx)]  # fmt: skip
    # A log file, not a pipe: an unread pipe would fill up and stall the server.
    out = log.open("wb") if log else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        try:
            wait_ready(proc, f"{base}/models", ready_seconds, f"llama_cpp.server ({model})")
        except RuntimeError as exc:
            tail = log.read_text("utf-8", "replace")[-2000:] if log else ""
            raise LLMUnavailableError(f"{exc}{': ' + tail if tail else ''}") from None
        yield base
    finally:
        stop_group(proc)
        if not isinstance(out, int):  # a log file we opened (DEVNULL is an int)
            out.close()
