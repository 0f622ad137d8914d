"""The service on a real uvicorn socket on 127.0.0.1: the official OpenAI SDK, a client
hanging up mid-stream, and one end-to-end question answered by the embedded 0.5B LLM.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from crag.config import CragSettings
from crag.engine import CRAG
from crag.protocols import Completion
from crag.registry import LLMS
from crag.server import answers as server_answers
from crag.server.app import create_app
from crag.testing.net import serve_in_thread

# Not imported from llm_fixtures: whether tests/ is a package decides if that import works.
ROOT = Path(__file__).resolve().parents[2]
SMALL_MODEL = "qwen2.5-coder-0.5b"
KEY = "uvicorn-test-key-42"
AUTH = {"Authorization": f"Bearer {KEY}"}
DOCS = [
    {
        "text": "The Tianjin Synagogue was completed in 1940 and stands in Heping District, Tianjin.",
        "title": "Tianjin Synagogue",
    },
    {
        "text": "CRAG grades retrieved documents and searches an external source when they are weak.",
        "title": "CRAG",
    },
    {"text": "BM25 ranks documents by keyword overlap with the query.", "title": "BM25"},
]


class SlowLLM:
    """Answers after ``delay`` seconds, so a stream stays open long enough to hang up on."""

    model_id = "test-slow"
    delay = 1.5

    def complete(self, messages: Sequence[dict[str, str]], **kw: Any) -> Completion:
        time.sleep(self.delay)
        return Completion("CRAG grades documents [1].", prompt_tokens=3, completion_tokens=2)


LLMS.register("test-slow", lambda settings, deps: SlowLLM())


def project_cache_dir() -> Path:
    """Where the bundled model is assembled once and shared across runs."""
    return Path(os.environ.get("CRAG_CACHE_DIR") or ROOT / ".cache" / "crag")


def build_kb(root: Path, **settings: Any) -> CRAG:
    src = root / "docs.jsonl"
    src.write_text("\n".join(json.dumps(d) for d in DOCS) + "\n", encoding="utf-8")
    engine = CRAG(CragSettings(kb={"path": root / "kb"}, search={"provider": "none"}, **settings))
    engine.ingest([src])
    return engine


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    engine = build_kb(tmp_path_factory.mktemp("uvicorn"), llm={"backend": "test-slow"})
    with serve_in_thread(create_app(engine, api_keys=[KEY])) as url:
        yield url


@pytest.mark.integration
def test_openai_sdk_against_the_server(base_url: str) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key=KEY, max_retries=0, timeout=60)
    raw = client.chat.completions.with_raw_response.create(
        model="crag", messages=[{"role": "user", "content": "What does CRAG grade?"}]
    )
    completion = raw.parse()
    assert raw.headers["x-trace-id"]
    assert completion.choices[0].message.content.startswith("CRAG grades documents [1].")
    assert completion.choices[0].message.annotations[0].type == "url_citation"  # the sources, as OpenAI has them
    assert completion.model_extra["crag"]["trace_id"] == raw.headers["x-trace-id"]

    stream = client.chat.completions.create(
        model="crag",
        stream=True,
        messages=[{"role": "user", "content": "What does CRAG do with documents?"}],
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text.startswith("CRAG grades documents [1].")

    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{base_url}/v1", api_key="wrong", max_retries=0).chat.completions.create(
            model="crag", messages=[{"role": "user", "content": "hi"}]
        )


@pytest.mark.integration
def test_openai_sdk_lists_and_picks_two_collections(tmp_path: Path) -> None:
    """The official client's models.list() sees each collection; model= picks the knowledge base."""
    openai = pytest.importorskip("openai")
    from crag.server.collections import Collections

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    build_kb(tmp_path / "a", llm={"backend": "test-slow"})  # the three documents above
    other = tmp_path / "b" / "kettle.md"
    other.write_text("---\nlang: zh\n---\n# 电水壶\n\nX200 电水壶三分钟烧开一升水。", "utf-8")
    settings = CragSettings(
        llm={"backend": "test-slow"},
        search={"provider": "none"},
        server={"collections": {"handbook": tmp_path / "a" / "kb", "家电": tmp_path / "b" / "kb"}},
    )
    collections = Collections.from_settings(settings)
    collections.resolve("家电").engine.ingest([other])
    with serve_in_thread(create_app(collections, api_keys=[KEY])) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=60)
        models = client.models.list()
        assert [(m.id, m.object, m.owned_by) for m in models.data] == [
            ("handbook", "model", "crag"),
            ("家电", "model", "crag"),
        ]
        assert client.models.retrieve("家电").id == "家电"
        done = client.chat.completions.create(model="家电", messages=[{"role": "user", "content": "X200 烧水要多久？"}])
        trace_id = done.model_extra["crag"]["trace_id"]
        with httpx.Client(base_url=url, headers=AUTH, timeout=60) as http:
            trace = http.get(f"/v1/traces/{trace_id}", params={"collection": "家电"}).json()
        assert [h["title"] for h in trace["retrieved"]] == ["电水壶"]
        with pytest.raises(openai.NotFoundError) as missing:
            client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        assert missing.value.code == "model_not_found"


@pytest.mark.integration
def test_client_disconnect_mid_stream_leaves_server_serving(base_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_answers, "KEEPALIVE_SECONDS", 0.2)  # write soon after the hang-up
    port = int(base_url.rsplit(":", 1)[1])
    body = json.dumps({"question": "What does CRAG grade?", "stream": True}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {KEY}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        first = sock.recv(4096)
        assert b"200 OK" in first
    # The run for the departed client is stopped at its next event; the server keeps serving.
    with httpx.Client(base_url=base_url, headers=AUTH, timeout=60) as client:
        assert client.get("/healthz").status_code == 200
        r = client.post("/v1/ask", json={"question": "What does CRAG grade?"})
        assert r.status_code == 200 and r.json()["answer"] == "CRAG grades documents [1]."
        time.sleep(1.0)  # the stopped run saves its trace too
        questions = [t["question"] for t in client.get("/v1/traces", params={"limit": 10}).json()["traces"]]
        assert questions.count("What does CRAG grade?") >= 2


@pytest.mark.integration
@pytest.mark.slow
def test_real_llm_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (crag[local])")
    monkeypatch.setenv("CRAG_CACHE_DIR", str(project_cache_dir()))
    monkeypatch.setenv("CRAG_LLM__MODEL", SMALL_MODEL)
    engine = build_kb(tmp_path, llm={"backend": "llama-cpp", "max_tokens": 64})
    assert engine.settings.llm.model == SMALL_MODEL
    with (
        serve_in_thread(create_app(engine, api_keys=[KEY])) as url,
        httpx.Client(base_url=url, headers=AUTH, timeout=300) as client,
    ):
        r = client.post("/v1/ask", json={"question": "When was the Tianjin Synagogue completed?"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["answer"].strip() and body["action"] in ("correct", "ambiguous", "incorrect")
        assert body["context"], "the synagogue document should reach the generator"
        trace = client.get(f"/v1/traces/{body['trace_id']}").json()
        assert any(s["name"] == "generate" for s in trace["spans"])
        assert client.get("/ui").status_code == 200
