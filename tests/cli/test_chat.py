"""``crag chat`` driven through stdin as a separate process, with the real components and the bundled 1.5B model.

Two questions, the second a follow-up that only makes sense after the first, then
``/sources``, ``/trace`` and ``/exit``. The model must be loaded once for the whole
conversation: llama.cpp models are loaded in one place (``LlamaCppLLM.warm_up``), which
logs "loaded <file>" each time it loads one, and ``-v`` shows that log (the claim check reads in a
second context of its own, loaded once when a claim first needs it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crag import CRAG

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample"
DIALOGUES = [json.loads(line) for line in (SAMPLE / "dialogues.jsonl").read_text("utf-8").splitlines()]
DIALOGUE = next(d for d in DIALOGUES if d["id"] == "en-dinwiddie")


def test_chat_answers_a_follow_up_with_the_model_loaded_once(tmp_path: Path) -> None:
    cache = os.environ.get("CRAG_CACHE_DIR") or str(ROOT / ".cache" / "crag")
    kb = tmp_path / "kb"
    CRAG.from_config(kb={"path": kb}).ingest([SAMPLE / "internal" / "en.jsonl"])
    first, second = (t["question"] for t in DIALOGUE["turns"])
    script = f"{first}\n{second}\n/sources\n/trace\n/exit\nnever read\n"
    done = subprocess.run(
        [sys.executable, "-m", "crag.cli", "chat", "--kb", str(kb), "--search", "none", "-v"],
        input=script,
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "CRAG_CACHE_DIR": cache, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    loads = [line for line in done.stderr.splitlines() if "loaded qwen2.5-coder-1.5b.gguf" in line]
    # two answers, one load of the answering context; the claim check's second context (n_ctx 2048),
    # when a claim needs the model's reading, is loaded once too
    contexts = [line.split("(n_ctx ")[1].split(")")[0] for line in loads]
    assert contexts.count("4096") == 1 and len(contexts) == len(set(contexts)), done.stderr[-3000:]
    out = done.stdout
    answers = out.split("trace ")[1:]  # each answer follows its decision line
    assert len(answers) >= 2, out
    assert any(a in answers[0] for a in DIALOGUE["turns"][0]["answers"]), out
    assert any(a in answers[1].split("asked")[0] for a in DIALOGUE["turns"][1]["answers"]), out
    # /sources: the last answer's citations; /trace: its decision path, with the message as asked.
    assert "[1]" in out and "French and Indian War" in out
    assert "asked" in out and second in out
    assert "never read" not in out + done.stderr
