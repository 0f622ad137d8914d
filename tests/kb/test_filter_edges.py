"""Filters as checked input, through the real ``crag serve`` process and the real CLI.

A request with 10,000 ``filters`` keys crashed the server (a segfault in Chroma's Rust
bindings), 999-5,000 keys answered 500 (SQLite: "Expression tree is too large"), and a key no
document carries (``tema=hr``) refused every question with 200 / exit 0. Now a filter has at
most ``MAX_FILTER_KEYS`` keys and ``MAX_FILTER_VALUES`` values (400 beyond), an unknown key is a
400 / exit 2 naming the known keys, and a filter no document matches is a 422 / exit 2 that
says so. One check (``crag.metadata.check_filters`` and ``KnowledgeBase.scope``) serves all ways in.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from crag.metadata import MAX_FILTER_KEYS, MAX_FILTER_VALUES
from crag.testing.processes import crag_cli, crag_serve
from crag.testing.stubs import StubLLM

pytest.importorskip("uvicorn", reason="needs crag[server]")
pytestmark = [pytest.mark.integration]

QUESTION = "How many days of annual leave are there?"
ROWS = [
    {"text": "Staff get 25 days of annual leave a year.", "title": "Leave", "team": "hr", "year": 2024},
    {"text": "Support answers tickets within 4 hours.", "title": "Tickets", "team": "support", "year": 2024},
    {"text": "员工每年有25天年假。", "title": "年假", "team": "人事", "year": 2023},
]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    root = tmp_path_factory.mktemp("filters")
    src = root / "handbook.jsonl"
    src.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in ROWS) + "\n", "utf-8")
    with StubLLM() as llm:
        env = {
            "CRAG_LLM__BACKEND": "openai",
            "CRAG_LLM__BASE_URL": llm.url,
            "CRAG_SEARCH__PROVIDER": "none",
            "COLUMNS": "200",
        }
        done = crag_cli("ingest", str(src), "--kb", str(root / "kb"), env=env)
        assert done.returncode == 0, done.stderr
        yield root / "kb", env


@pytest.fixture(scope="module")
def server(setup: tuple[Path, dict[str, str]]) -> Iterator[httpx.Client]:
    kb, env = setup
    with crag_serve(kb, env=env) as url, httpx.Client(base_url=url, timeout=60) as client:
        yield client


def _error(r: httpx.Response) -> str:
    return str(r.json()["error"]["message"])


@pytest.mark.parametrize("keys", [10_000, 1_000, MAX_FILTER_KEYS + 1])
def test_too_many_keys_is_a_400_and_the_server_lives(server: httpx.Client, keys: int) -> None:
    filters = {f"k{i}": f"v{i}" for i in range(keys)}
    for path, body in (
        ("/v1/ask", {"question": QUESTION, "filters": filters}),
        ("/v1/ask", {"question": QUESTION, "filters": filters, "stream": True}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": QUESTION}], "filters": filters}),
    ):
        r = server.post(path, json=body)
        assert r.status_code == 400, (path, r.status_code, r.text[:300])
        assert f"the limit is {MAX_FILTER_KEYS}" in _error(r) and "\n" not in _error(r)
    assert server.get("/healthz").status_code == 200  # no crash, no lost worker


def test_too_many_values_is_a_400(server: httpx.Client) -> None:
    half = MAX_FILTER_VALUES // 2 + 1
    filters = {"team": [f"t{i}" for i in range(half)], "year": [str(i) for i in range(half)]}
    r = server.post("/v1/ask", json={"question": QUESTION, "filters": filters})
    assert r.status_code == 400 and f"more than {MAX_FILTER_VALUES} values" in _error(r), r.text


def test_an_unknown_key_is_a_400_naming_the_known_keys(server: httpx.Client) -> None:
    r = server.post("/v1/ask", json={"question": QUESTION, "filters": {"tema": "hr"}})
    assert r.status_code == 400, r.text
    message = _error(r)
    assert "'tema'" in message and "known keys: source, team, title, url, year" in message, message
    chat = {"messages": [{"role": "user", "content": QUESTION}], "filters": {"lang": "zh"}, "stream": True}
    r = server.post("/v1/chat/completions", json=chat)
    assert r.status_code == 400 and "'lang'" in _error(r), r.text


def test_a_filter_matching_no_document_says_so(server: httpx.Client) -> None:
    r = server.post("/v1/ask", json={"question": QUESTION, "filters": {"team": "legal"}})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["type"] == "no_matching_documents"
    assert _error(r) == "no document matches the filter team=legal; team is one of: hr, support, 人事"
    both = {"team": "人事", "year": 2024}  # each key matches, the two together do not
    r = server.post("/v1/ask", json={"question": QUESTION, "filters": both, "stream": True})
    assert r.status_code == 422 and "no document matches them all" in _error(r), r.text


def test_a_known_matching_filter_answers(server: httpx.Client) -> None:
    r = server.post("/v1/ask", json={"question": QUESTION, "filters": {"team": ["hr", "support"], "year": 2024}})
    assert r.status_code == 200, r.text
    sources = {c["title"] for c in r.json()["context"]}
    assert sources and sources <= {"Leave", "Tickets"}


def test_the_cli_applies_the_same_rules(setup: tuple[Path, dict[str, str]]) -> None:
    kb, env = setup
    ask = ("ask", QUESTION, "--kb", str(kb), "--mode", "rag")
    unknown = crag_cli(*ask, "--filter", "tema=hr", env=env)
    assert unknown.returncode == 2, unknown.stdout + unknown.stderr
    line = " ".join(unknown.stderr.split())
    assert line.startswith("error: filter key 'tema' is not a field of any document; known keys: source, team")
    assert "Traceback" not in unknown.stderr and unknown.stdout == ""
    none = crag_cli(*ask, "--filter", "team=legal", "--filter", "team=finance", env=env)
    assert none.returncode == 2
    assert "no document matches the filter team=legal|finance; team is one of: hr, support, 人事" in " ".join(
        none.stderr.split()
    )
    many = crag_cli(*ask, *[f"--filter=k{i}=v" for i in range(MAX_FILTER_KEYS + 1)], env=env)
    assert many.returncode == 2 and f"the limit is {MAX_FILTER_KEYS}" in many.stderr
    ok = crag_cli(*ask, "--filter", "team=人事", "--json", env=env)
    assert ok.returncode == 0, ok.stderr
    assert [c["title"] for c in json.loads(ok.stdout)["context"]] == ["年假"]
