"""The OpenAI-compatible chat client: a real local llama_cpp.server, plus MockTransport errors."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from crag.config import CragSettings
from crag.errors import LLMError, LLMUnavailableError, MissingAPIKeyError
from crag.llm.openai_chat import OpenAIChatLLM, is_local_url
from crag.protocols import LLM
from crag.registry import LLMS, BackendDeps
from crag.testing.llama_server import serve_gguf
from crag.testing.net import free_port
from llm_fixtures import assert_streamed, small_gguf

SECRET = "sk-test-DO-NOT-LEAK-1234567890"
OK_BODY = {
    "model": "served-model",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": " Paris. "}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
}
ASK = [{"role": "user", "content": "What is the capital of France?"}]


def mock_client(handler: Callable[[httpx.Request], httpx.Response]) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(handler))


# -- a real OpenAI-compatible server: python -m llama_cpp.server with the 0.5B model -------


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("llama_cpp.server.app", reason="needs llama-cpp-python[server]")
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    try:
        with serve_gguf(str(small_gguf()), n_ctx=2048, log=log) as base:
            yield base
    except LLMUnavailableError as exc:
        pytest.fail(str(exc))


@pytest.mark.integration
@pytest.mark.slow
def test_real_server_chat_completion(server_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # local server: no key needed
    llm = LLMS.create(
        "openai-compatible",
        CragSettings(llm={"backend": "openai", "base_url": server_url, "model": "qwen2.5-coder-0.5b"}),
    )
    try:
        out = llm.complete(
            [
                {"role": "system", "content": "Answer from the context only, in one short sentence."},
                {
                    "role": "user",
                    "content": "Context: The Lumen Bridge in Varda was opened in 1987.\n"
                    "Question: When was the Lumen Bridge opened?",
                },
            ],
            max_tokens=48,
        )
    finally:
        llm.close()
    assert "1987" in out.text
    assert out.prompt_tokens > 10 and 0 < out.completion_tokens <= 48


@pytest.mark.integration
@pytest.mark.slow
def test_real_server_streams_tokens_as_they_are_written(server_url: str) -> None:
    llm = OpenAIChatLLM(server_url, "qwen2.5-coder-0.5b", retries=0)
    messages = [{"role": "user", "content": "Write three short sentences about bridges."}]
    pieces: list[str] = []
    arrived: list[float] = []
    t0 = time.monotonic()
    try:
        gen = llm.stream(messages, max_tokens=48)
        while True:
            try:
                pieces.append(next(gen))
                arrived.append(time.monotonic() - t0)
            except StopIteration as end:
                done = end.value
                break
        total = time.monotonic() - t0
        # Stopping early closes the connection; the server then answers the next call.
        early = llm.stream(messages, max_tokens=48)
        assert next(early)
        early.close()
        assert llm.complete([{"role": "user", "content": "Say OK."}], max_tokens=4).text
    finally:
        llm.close()
    assert done.text == "".join(pieces).strip()
    assert_streamed(arrived, total)
    assert 0 < done.completion_tokens <= 48


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize(
    ("question", "fact", "other", "gold"),
    [
        ("When was the Lumen Bridge opened?", "The Lumen Bridge in Varda was opened in 1987.",
         "The Lumen Tower in Varda is 120 metres tall.", "1987"),
        ("卢门大桥是哪一年通车的？", "位于瓦尔达的卢门大桥于1987年通车。", "瓦尔达的卢门塔高120米。", "1987"),
    ],
)  # fmt: skip
def test_generator_through_an_openai_compatible_server(
    server_url: str, question: str, fact: str, other: str, gold: str
) -> None:
    """The generator's prompts work through the OpenAI-compatible path too (hosted models)."""
    from crag.generate import generate
    from crag.types import Strip

    llm = OpenAIChatLLM(server_url, "qwen2.5-coder-0.5b", retries=0)
    # Fusion hands the generator its strips best first; the distractor comes second.
    context = [Strip(fact, "a.txt", "web", score=0.9), Strip(other, "b.txt", "web", score=0.5)]
    try:
        g = generate(question, context, llm, max_tokens=64, reask_above=0.8)
    finally:
        llm.close()
    assert not g.refused and gold in g.text, g.text
    assert g.sources[0].text == fact and g.citations and g.citations[0].id == 1


@pytest.mark.integration
@pytest.mark.slow
def test_real_server_json_mode(server_url: str) -> None:
    llm = OpenAIChatLLM(server_url, "qwen2.5-coder-0.5b", retries=0)
    schema = {"type": "object", "properties": {"year": {"type": "integer"}}, "required": ["year"]}
    try:
        out = llm.complete(
            [{"role": "user", "content": "The Lumen Bridge was opened in 1987. When was it opened?"}],
            max_tokens=32,
            json_schema=schema,
        )
    finally:
        llm.close()
    assert isinstance(json.loads(out.text), dict)


@pytest.mark.integration
@pytest.mark.slow
def test_real_server_yes_probability_matches_the_embedded_model(server_url: str) -> None:
    """The hosted path's P(yes) (from logprobs) is the embedded model's, and it separates answers."""
    from crag.correct.verify import verify_messages
    from crag.llm.llama_cpp import LlamaCppLLM

    q = "When was the Lumen Bridge opened?"
    answers = verify_messages(q, ["The Lumen Bridge in Varda was opened in 1987."], "en")
    other = verify_messages(q, ["The Lumen Tower in Varda is 120 metres tall."], "en")
    served = OpenAIChatLLM(server_url, "qwen2.5-coder-0.5b", retries=0)
    embedded = LlamaCppLLM(str(small_gguf()), n_ctx=2048, flash_attn=False)  # as llama_cpp.server loads it
    try:
        hosted = [served.yes_probability(answers), served.yes_probability(other)]
        local = [embedded.yes_probability(answers), embedded.yes_probability(other)]
    finally:
        served.close()
    print(f"P(yes) served {hosted}, embedded {local}")
    assert hosted[0] > hosted[1], hosted
    # The same weights, another sampler build and top-20 list: the same score to two decimals.
    assert hosted == pytest.approx(local, abs=0.02), (hosted, local)


# -- error paths ------------------------------------------------------------------------


@pytest.mark.unit
def test_unreachable_endpoint_is_unavailable_quickly() -> None:
    base = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    llm = OpenAIChatLLM(base, "m", retries=1, timeout=5)
    start = time.monotonic()
    with pytest.raises(LLMUnavailableError) as info:
        llm.complete(ASK)
    llm.close()
    assert time.monotonic() - start < 10
    msg = str(info.value)
    assert base in msg and "llm.base_url" in msg and "running" in msg and "\n" not in msg


@pytest.mark.unit
def test_http_500_then_success_is_retried() -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return httpx.Response(500, text="boom") if len(calls) == 1 else httpx.Response(200, json=OK_BODY)

    llm = OpenAIChatLLM("http://127.0.0.1:9/v1", "served-model", retries=1, client=mock_client(handler))
    out = llm.complete(ASK)
    assert len(calls) == 2
    assert (out.text, out.prompt_tokens, out.completion_tokens, out.model) == (
        "Paris.",
        12,
        3,
        "served-model",
    )


@pytest.mark.unit
def test_persistent_503_is_unavailable() -> None:
    llm = OpenAIChatLLM("http://127.0.0.1:9/v1", "m", retries=0, client=mock_client(lambda r: httpx.Response(503)))
    with pytest.raises(LLMUnavailableError, match="HTTP 503"):
        llm.complete(ASK)


@pytest.mark.unit
@pytest.mark.parametrize("status", [401, 403])
def test_auth_failure_mentions_api_key_and_never_the_key(status: int) -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization", ""))
        return httpx.Response(status, json={"error": {"message": f"bad key {SECRET}"}})

    llm = OpenAIChatLLM(
        "https://api.example.com/v1",
        "m",
        api_key=SECRET,
        api_key_env="EXAMPLE_KEY",
        client=mock_client(handler),
    )
    with pytest.raises(LLMError) as info:
        llm.complete(ASK)
    assert not isinstance(info.value, LLMUnavailableError)
    assert seen == [f"Bearer {SECRET}"]
    msg = str(info.value)
    assert "API key" in msg and "EXAMPLE_KEY" in msg
    assert SECRET not in msg and SECRET not in repr(info.value)
    assert SECRET not in repr(llm) and SECRET not in str(vars(llm))


@pytest.mark.unit
def test_bad_request_is_llm_error_not_unavailable() -> None:
    llm = OpenAIChatLLM(
        "http://127.0.0.1:9/v1",
        "m",
        client=mock_client(lambda r: httpx.Response(400, text="context too long")),
    )
    with pytest.raises(LLMError, match="HTTP 400") as info:
        llm.complete(ASK)
    assert not isinstance(info.value, LLMUnavailableError)


@pytest.mark.unit
@pytest.mark.parametrize("payload", [{"choices": []}, {"error": "x"}, [1, 2], {"choices": [{"text": "hi"}]}])
def test_malformed_response_is_llm_error(payload: object) -> None:
    llm = OpenAIChatLLM("http://127.0.0.1:9/v1", "m", client=mock_client(lambda r: httpx.Response(200, json=payload)))
    with pytest.raises(LLMError, match="malformed"):
        llm.complete(ASK)


@pytest.mark.unit
def test_json_schema_request_shape() -> None:
    bodies: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json={**OK_BODY, "choices": [{"message": {"content": '{"a": 1}'}}]})

    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    local = OpenAIChatLLM("http://127.0.0.1:9/v1", "m", client=mock_client(handler))
    assert json.loads(local.complete(ASK, json_schema=schema, max_tokens=7, temperature=0.2).text) == {"a": 1}
    body = bodies[-1]
    assert body["response_format"] == {"type": "json_object"}
    assert (body["model"], body["max_tokens"], body["temperature"]) == ("m", 7, 0.2)
    # The schema travels in the prompt; the caller's messages are kept.
    assert body["messages"][0]["role"] == "system" and '"a"' in body["messages"][0]["content"]
    assert body["messages"][1:] == ASK

    asks_json = [{"role": "system", "content": "Reply in JSON."}, *ASK]
    local.complete(asks_json, json_schema=schema)
    assert bodies[-1]["messages"] == asks_json  # already asks for JSON: untouched

    openai = OpenAIChatLLM("https://api.openai.com/v1", "gpt", api_key=SECRET, client=mock_client(handler))
    openai.complete(ASK, json_schema=schema)
    assert bodies[-1]["response_format"]["type"] == "json_schema"
    assert bodies[-1]["response_format"]["json_schema"]["schema"] == schema

    local.complete(ASK)
    assert "response_format" not in bodies[-1]


# -- registry factory and keys ----------------------------------------------------------


@pytest.mark.unit
def test_factory_requires_key_for_remote_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRAG_TEST_CHAT_KEY", raising=False)
    settings = CragSettings(
        llm={
            "backend": "openai",
            "base_url": "https://api.deepseek.com/v1",
            "model": "deepseek-chat",
            "api_key_env": "CRAG_TEST_CHAT_KEY",
        }
    )
    with pytest.raises(MissingAPIKeyError, match="CRAG_TEST_CHAT_KEY"):
        LLMS.create("openai", settings)

    monkeypatch.setenv("CRAG_TEST_CHAT_KEY", SECRET)
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization", ""))
        return httpx.Response(200, json=OK_BODY)

    llm = LLMS.create("openai", settings, BackendDeps(client=mock_client(handler)))
    assert isinstance(llm, OpenAIChatLLM) and isinstance(llm, LLM)
    assert llm.model_id == "openai:deepseek-chat"
    llm.complete(ASK)
    assert seen == [f"Bearer {SECRET}"]
    assert SECRET not in repr(llm)


@pytest.mark.unit
def test_factory_local_host_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRAG_TEST_CHAT_KEY", raising=False)
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, json=OK_BODY)

    settings = CragSettings(
        llm={
            "backend": "openai",
            "base_url": "http://localhost:11434/v1",
            "model": "qwen2.5",
            "api_key_env": "CRAG_TEST_CHAT_KEY",
            "retries": 0,
        }
    )
    llm = LLMS.create("openai-compatible", settings, BackendDeps(client=mock_client(handler)))
    assert llm.complete(ASK).text == "Paris."
    assert seen == [None]
    assert llm.retries == 0


@pytest.mark.unit
def test_is_local_url() -> None:
    assert all(map(is_local_url, ["http://localhost:8080/v1", "http://127.0.0.1/v1", "http://[::1]:1/v1"]))
    assert not any(map(is_local_url, ["https://api.openai.com/v1", "http://10.0.0.5:8000/v1", "nonsense"]))


@pytest.mark.unit
def test_constructor_is_cheap_and_validates(tmp_path: Path) -> None:
    llm = OpenAIChatLLM("http://127.0.0.1:9/v1/", "m")
    assert llm.base_url == "http://127.0.0.1:9/v1"
    with pytest.raises(ValueError):
        OpenAIChatLLM("", "m")
    with pytest.raises(ValueError):
        OpenAIChatLLM("http://127.0.0.1:9/v1", "m", retries=-1)


def logprob_body(*tops: tuple[str, float]) -> dict[str, object]:
    listed = [{"token": t, "logprob": lp} for t, lp in tops]
    first = {"token": tops[0][0], "logprob": tops[0][1], "top_logprobs": listed}
    return {**OK_BODY, "choices": [{**OK_BODY["choices"][0], "logprobs": {"content": [first]}}]}


@pytest.mark.unit
def test_yes_probability_sums_the_spellings_from_logprobs() -> None:
    import math

    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, json=logprob_body(("Yes", math.log(0.5)), (" yes", math.log(0.1)),
                                                     ("No", math.log(0.3)), ("Maybe", math.log(0.1))))  # fmt: skip

    llm = OpenAIChatLLM("http://127.0.0.1:9/v1", "m", client=mock_client(handler))
    assert llm.yes_probability(ASK) == pytest.approx(0.6 / 0.9)
    assert seen[0]["logprobs"] is True and seen[0]["max_tokens"] == 1 and seen[0]["top_logprobs"] == 20


@pytest.mark.unit
def test_yes_probability_bounds_an_unlisted_answer() -> None:
    import math

    body = logprob_body(("yes", math.log(0.9)), ("Yes", math.log(0.05)), ("The", math.log(0.01)))
    llm = OpenAIChatLLM("http://127.0.0.1:9/v1", "m", client=mock_client(lambda r: httpx.Response(200, json=body)))
    # "no" is not listed: it is at most 0.01 (the last entry), so P(yes) >= 0.95 / 0.96.
    assert llm.yes_probability(ASK) == pytest.approx(0.95 / 0.96)


@pytest.mark.unit
def test_yes_probability_without_logprobs_fails_once_then_without_a_request() -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return httpx.Response(200, json=OK_BODY)  # a server that ignores logprobs

    llm = OpenAIChatLLM("http://127.0.0.1:9/v1", "m", client=mock_client(handler))
    for _ in range(2):
        with pytest.raises(LLMError, match="no token log-probabilities"):
            llm.yes_probability(ASK)
    assert calls == [1]


@pytest.mark.unit
def test_yes_probability_names_a_reply_that_is_not_yes_or_no() -> None:
    body = logprob_body(("Paris", -0.1), ("The", -2.5))
    llm = OpenAIChatLLM("http://127.0.0.1:9/v1", "m", client=mock_client(lambda r: httpx.Response(200, json=body)))
    with pytest.raises(LLMError, match="neither yes nor no"):
        llm.yes_probability(ASK)
