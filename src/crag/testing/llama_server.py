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
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from crag.errors import LLMUnavailableError
from crag.llm.models import resolve_gguf
from crag.testing.net import free_port

__all__ = ["serve_gguf"]


@contextmanager
def serve_gguf(model: str, *, n_ctx: int = 4096, ready_seconds: float = 120) -> Iterator[str]:
    """Run ``python -m llama_cpp.server`` for ``model``; yield its ``/v1`` base URL."""
    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(resolve_gguf(model)),
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx)]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + ready_seconds
        while True:
            if proc.poll() is not None:
                raise LLMUnavailableError(f"llama_cpp.server exited with {proc.returncode} for {model}")
            try:
                if httpx.get(f"{base}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise LLMUnavailableError(f"llama_cpp.server not ready after {ready_seconds:g} s for {model}")
            time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
