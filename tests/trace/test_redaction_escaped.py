"""A key echoed escaped by its provider never leaves the process, through every real output path.

A Tavily-style provider that writes ``/`` as ``\\/`` in its error body (legal JSON, PHP's
default) leaked the part of the key after the slash, and a key without a digit leaked whole:
the known value was matched only as written, and the ``Bearer`` rule stops at a backslash and
needs a digit. :class:`crag.testing.canary.EscapingEcho` (127.0.0.1) answers every search with
a key echoed JSON-escaped (``\\/``, ``\\u002f``), URL-encoded, as ``base64("user:key")`` or in
upper case. The real ``crag serve`` process, the real CLI (``ask``, ``trace show``, ``trace
list``, ``eval``) and the trace database are read for any piece of either key.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from crag.testing.canary import ESCAPED_KEYS, EscapingEcho, echoed_forms, escaped_leaks
from crag.testing.processes import crag_cli, crag_serve
from crag.testing.stubs import StubLLM

pytest.importorskip("uvicorn", reason="needs crag[server]")
pytestmark = [pytest.mark.integration]

QUESTIONS = [
    "Who designed the harbour museum of Vellmar?",
    "When did the Vellmar tramway close?",
    "How tall is the Vellmar lighthouse?",
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str], EscapingEcho]]:
    root = tmp_path_factory.mktemp("escaped")
    (root / "pasta.txt").write_text("Carbonara is made with eggs, cheese, guanciale and pepper.", "utf-8")
    with EscapingEcho() as echo, StubLLM() as llm:
        env = {
            **ESCAPED_KEYS,
            "CRAG_LLM__BACKEND": "openai",
            "CRAG_LLM__BASE_URL": llm.url,
            "CRAG_SEARCH__PROVIDER": "tavily",
            "CRAG_SEARCH__TAVILY_URL": echo.url,
            "CRAG_SEARCH__RETRIES": "0",
            "CRAG_CORRECTION__SEARCH_CACHE_TTL": "0",  # every question reaches the provider
            "COLUMNS": "250",
        }
        done = crag_cli("ingest", str(root / "pasta.txt"), "--kb", str(root / "kb"), env=env)
        assert done.returncode == 0, done.stderr
        yield root, env, echo


def test_no_piece_of_an_escaped_key_in_any_output(world: tuple[Path, dict[str, str], EscapingEcho]) -> None:
    root, env, echo = world
    kb = root / "kb"
    outputs: list[str | bytes] = []
    ids: list[str] = []
    with crag_serve(kb, env=env) as url, httpx.Client(base_url=url, timeout=120) as client:
        for question in QUESTIONS:
            r = client.post("/v1/ask", json={"question": question})
            assert r.status_code == 200, r.text
            outputs.append(r.text)
            ids.append(r.json()["trace_id"])
            with client.stream("POST", "/v1/ask", json={"question": question, "stream": True}) as s:
                outputs.append("".join(s.iter_text()))
            assert "event: done" in outputs[-1]
        for trace_id in ids:
            outputs.append(client.get(f"/v1/traces/{trace_id}").text)
        outputs.append(client.get("/v1/traces").text)
    degradations = [d for o in outputs[:1] for d in json.loads(o)["degradations"]]
    assert any("tavily: HTTP 400" in d and "***" in d for d in degradations), degradations  # echoed, then removed

    for extra in ([], ["--json"]):
        asked = crag_cli("ask", QUESTIONS[0], "--kb", str(kb), *extra, env=env)
        assert asked.returncode == 0, asked.stderr
        outputs += [asked.stdout, asked.stderr]
    for trace_id in ids:
        for extra in ([], ["--json"]):
            shown = crag_cli("trace", "show", trace_id, "--kb", str(kb), *extra, env=env)
            assert shown.returncode == 0, shown.stderr
            outputs += [shown.stdout, shown.stderr]
    assert any("tavily: HTTP 400" in o and "***" in o for o in outputs[-4:-2])  # `trace show` names the failure
    outputs.append(crag_cli("trace", "list", "--kb", str(kb), env=env).stdout)

    dataset = root / "qa.jsonl"
    dataset.write_text("".join(json.dumps({"question": q, "answers": ["x"]}) + "\n" for q in QUESTIONS), "utf-8")
    evaluated = crag_cli(
        "eval", "--dataset", str(dataset), "--kb", str(kb), "--modes", "crag", "--output", str(root / "eval"), env=env
    )
    assert evaluated.returncode == 0, evaluated.stderr
    outputs += [evaluated.stdout, evaluated.stderr]
    outputs += [p.read_bytes() for p in (root / "eval").rglob("*") if p.is_file()]
    assert b"***" in (root / "eval" / "results.jsonl").read_bytes()
    outputs += [p.read_bytes() for p in kb.iterdir() if p.name.startswith("traces.sqlite")]

    # Every key was echoed in every form, and no piece of any survived.
    assert {f for _, f in echo.served} == set(echoed_forms("x")) and {k for k, _ in echo.served} == set(ESCAPED_KEYS)
    assert escaped_leaks(outputs) == []
