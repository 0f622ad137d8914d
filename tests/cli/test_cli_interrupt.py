"""Leaving an answer early — Ctrl-C, a reader that closed the pipe — ends the process cleanly.

The answer runs in a worker thread that holds the embedded model. The CLI used to exit
while that thread was still inside llama.cpp: the model was freed at exit under it and the
process died with a segmentation fault (exit 139), before the trace was saved.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from crag.cli._common import answer_stream
from crag.llm import llama_cpp
from crag.pipeline.live import AnswerStream
from crag.types import Query
from llm_fixtures import project_cache_dir


class _SlowRun:
    """A run that writes a piece every 20 ms for two seconds, heard through its heartbeats."""

    def __init__(self) -> None:
        self.ended = threading.Event()

    def ask_stream(self, question: str, **kw: Any) -> AnswerStream:
        return AnswerStream(self._run, trace_id="t1")

    def _run(self, on_step: Any) -> None:
        try:
            on_step("query", Query("Who?", "en"))
            for _ in range(100):
                time.sleep(0.02)
                on_step.heartbeat()
        finally:
            self.ended.set()


@pytest.mark.unit
def test_leaving_the_answer_early_waits_for_the_run_to_stop() -> None:
    rag = _SlowRun()
    with pytest.raises(KeyboardInterrupt), answer_stream(rag, "Who?") as events:  # type: ignore[arg-type]
        next(events)
        raise KeyboardInterrupt
    assert rag.ended.is_set()  # stopped at its next heartbeat, not left running into the exit


@pytest.mark.unit
def test_a_model_busy_at_exit_is_not_freed_under_its_call(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[str] = []

    class _Llama:
        def __init__(self, name: str) -> None:
            self.name = name

        def close(self) -> None:
            closed.append(self.name)

    busy, idle = llama_cpp._Loaded(_Llama("busy")), llama_cpp._Loaded(_Llama("idle"))
    monkeypatch.setattr(llama_cpp, "_LOADED", {("busy", 0, False): busy, ("idle", 0, False): idle})
    monkeypatch.setattr(llama_cpp, "_EXIT_WAIT_SECONDS", 0.1)
    busy.lock.acquire()  # a worker thread is inside llama.cpp with it
    try:
        llama_cpp._close_loaded()
    finally:
        busy.lock.release()
    assert closed == ["idle"]


@pytest.mark.integration
@pytest.mark.slow
def test_ctrl_c_while_the_model_writes_exits_130_and_saves_the_trace(tmp_path: Path) -> None:
    env = {**os.environ, "CRAG_LLM__MODEL": "qwen2.5-coder-0.5b", "CRAG_CACHE_DIR": str(project_cache_dir())}
    docs = tmp_path / "warsaw.md"
    docs.write_text("# Warsaw\n\nThe Royal University of Warsaw was established in 1816.", "utf-8")
    kb = str(tmp_path / "kb")
    cli = [sys.executable, "-m", "crag.cli"]
    assert subprocess.run([*cli, "ingest", str(docs), "--kb", kb], env=env, capture_output=True).returncode == 0
    ask = [*cli, "ask", "When was the Royal University of Warsaw established?", "--kb", kb, "--search", "none"]
    proc = subprocess.Popen(ask, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    decision = proc.stdout.readline()  # printed once the evaluator decided: the model is about to write
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Fatal Python error" not in stderr and "Traceback" not in stderr
    assert "interrupted" in stderr
    trace_id = decision.split("trace ")[-1].strip()
    shown = subprocess.run([*cli, "trace", "show", trace_id, "--kb", kb, "--json"], env=env, capture_output=True)
    assert shown.returncode == 0, shown.stderr
    trace = json.loads(shown.stdout)
    assert trace["status"] == "cancelled" and trace["cancelled"] and not trace.get("errors")
