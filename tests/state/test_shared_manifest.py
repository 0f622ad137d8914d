"""The manifest (documents, chunk texts, versions, metadata) in a shared PostgreSQL database.

With ``kb.state_uri`` set, a knowledge base's manifest is rows under its name in the state
database (:mod:`crag.store.manifest_db`) and writers queue on an advisory lock there
(:mod:`crag.store.writelock_db`): its folder holds neither ``manifest.sqlite`` nor
``write.lock``. The same documents ingested into a SQLite manifest and a PostgreSQL one must
read back the same, filters included.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from crag.errors import KnowledgeBaseError
from crag.kb import KnowledgeBase
from crag.metadata import MAX_FILTER_VALUES
from crag.state import MANIFEST, StateDB
from crag.store.documents import DocumentRecord
from crag.store.manifest_db import ManifestDB
from crag.store.writelock_db import AdvisoryWriteLock
from crag.testing.fakes import HashEmbedder

pytestmark = pytest.mark.integration

DOCS = {
    "leave.md": ("# Annual leave\n\nEmployees get 25 days of annual leave a year.", {"team": "hr", "lang": "en"}),
    "年假.md": ("# 年假制度\n\n员工每年享有二十五天带薪年假。", {"team": "人事", "lang": "zh"}),
    "roadmap.md": ("# Roadmap\n\nThe search team ships hybrid retrieval this spring.", {"team": "产品", "lang": "en"}),
}


def write_docs(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, (text, _) in DOCS.items():
        (folder / name).write_text(text, "utf-8")
        paths.append(folder / name)
    return paths


def fill(kb: KnowledgeBase, paths: list[Path]) -> None:
    for path in paths:
        report = kb.ingest([path], metadata=DOCS[path.name][1])
        assert report.count("added") == 1, report.files


def same(docs: list[DocumentRecord | None]) -> list[DocumentRecord]:
    """The records without the second they were ingested at."""
    return [dataclasses.replace(d, ingested_at="") for d in docs if d is not None]


def on_postgres(url: str, folder: Path, name: str = "handbook") -> KnowledgeBase:
    return KnowledgeBase(folder, HashEmbedder(), state=StateDB(url, MANIFEST, scope=name))


def test_a_knowledge_base_on_state_uri_reads_back_as_on_sqlite(pg_url: str, tmp_path: Path) -> None:
    paths = write_docs(tmp_path / "docs")
    lite = KnowledgeBase(tmp_path / "lite", HashEmbedder())
    shared = on_postgres(pg_url, tmp_path / "shared")
    fill(lite, paths)
    fill(shared, paths)

    assert (tmp_path / "lite" / "manifest.sqlite").is_file() and (tmp_path / "lite" / "write.lock").exists()
    assert not (tmp_path / "shared" / "manifest.sqlite").exists()  # the folder holds no manifest...
    assert not (tmp_path / "shared" / "write.lock").exists()  # ...and no lock file
    a, b = lite.manifest, shared.manifest
    assert isinstance(b, ManifestDB)
    assert b.counts() == a.counts() == (3, 3) and b.generation == a.generation == 3
    assert b.ordered_ids() == a.ordered_ids() and b.files() == a.files()
    assert b.chunks() == a.chunks()  # texts, titles, sources and metadata, in the same order
    ids = a.ordered_ids()
    assert b.texts(ids) == a.texts(ids) and b.known([*ids, "nope"]) == set(ids)
    assert same(b.documents()) == same(a.documents()) and b.count_documents() == 3
    assert same([b.document_by_id(a.documents()[0].id)]) == same(a.documents()[:1])
    assert b.metadata_keys() == a.metadata_keys() == {"team", "lang"}
    assert b.metadata_values("team", 10) == a.metadata_values("team", 10) == ["hr", "产品", "人事"]  # code point order
    for where in ({"lang": ("en",)}, {"team": ("人事", "产品")}, {"lang": ("en",), "team": ("hr",)}, {"team": ("x",)}):
        assert b.filtered_ids(where) == a.filtered_ids(where), where
    assert b.metadata_rows("", 10) == a.metadata_rows("", 10) and len(b.metadata_rows("", 10)) == 3
    after = a.metadata_rows("", 1)[0].id
    assert b.metadata_rows(after, 10) == a.metadata_rows(after, 10)  # the next batch of an upgrade
    changed = [dataclasses.replace(c, metadata={**c.metadata, "year": "2026"}) for c in a.chunks()[:1]]
    a.set_metadata(changed)
    b.set_metadata(changed)
    assert b.chunks() == a.chunks() and b.filtered_ids({"year": ("2026",)}) == {changed[0].id}
    title = a.chunks()[0].title
    assert b.filtered_ids({"title": (title,)}) == a.filtered_ids({"title": (title,)}) != set()
    assert [h.chunk.id for h in shared.search("annual leave days", k=3, filters={"lang": "en"})] == [
        h.chunk.id for h in lite.search("annual leave days", k=3, filters={"lang": "en"})
    ]


def test_a_filter_is_one_flat_statement_whatever_its_size(pg_url: str, tmp_path: Path) -> None:
    kb = on_postgres(pg_url, tmp_path / "kb")
    fill(kb, write_docs(tmp_path / "docs"))
    manifest = kb.manifest
    assert isinstance(manifest, ManifestDB)
    seen: list[tuple[str, object]] = []

    def record(conn: object, cursor: object, statement: str, params: object, context: object, many: bool) -> None:
        seen.append((statement, params))

    engine = manifest.db._engine()
    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        values = (*(f"v{i}" for i in range(MAX_FILTER_VALUES - 1)), "产品")
        found = manifest.filtered_ids({"team": values, "lang": ("en", "zh"), "a.b": ("1",)})
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)
    assert found == set()  # "a.b" is one key no chunk has, not a path into "a"
    statements = [(s, p) for s, p in seen if "kb_chunks" in s]
    assert len(statements) == 1
    sql, params = statements[0]
    assert sql.count("ANY") == 3 and len(params) <= 7, (sql, params)  # one array per key, not one per value
    assert manifest.filtered_ids({"team": values}) == manifest.filtered_ids({"team": ("产品",)}) != set()


def test_a_re_ingest_replaces_and_a_removal_forgets_in_one_commit_each(pg_url: str, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    kb = on_postgres(pg_url, tmp_path / "kb")
    fill(kb, docs)
    first = kb.manifest.document(str(docs[0].resolve()))
    assert first is not None and first.version == 1
    docs[0].write_text("# Annual leave\n\nFrom 2027 employees get 30 days of annual leave.", "utf-8")
    assert kb.ingest([docs[0]]).count("updated") == 1
    doc = kb.document(first.id)
    assert doc.version == 2 and doc.metadata == {"team": "hr", "lang": "en"}  # kept by a plain re-ingest
    assert "30 days" in kb.document_chunks(first.id)[0].text
    assert kb.stats()["generation"] == 4
    kb.remove_documents([first.id])
    assert kb.manifest.document_by_id(first.id) is None and kb.manifest.counts() == (2, 2)
    assert kb.manifest.metadata_values("team", 10) == ["产品", "人事"]


def test_knowledge_bases_of_one_database_are_apart(pg_url: str, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    fill(on_postgres(pg_url, tmp_path / "a", "handbook"), docs[:1])
    other = on_postgres(pg_url, tmp_path / "b", "roadmaps")
    assert not ManifestDB.exists(StateDB(pg_url, MANIFEST, scope="roadmaps"))
    with pytest.raises(KnowledgeBaseError):
        KnowledgeBase.open(tmp_path / "b", HashEmbedder(), state=StateDB(pg_url, MANIFEST, scope="roadmaps"))
    fill(other, docs[2:])
    assert other.manifest.counts() == (1, 1) and other.manifest.metadata_keys() == {"team", "lang"}
    assert other.manifest.filtered_ids({"lang": ("en",)}) == other.manifest.chunk_ids()
    handbook = StateDB(pg_url, MANIFEST, scope="handbook")
    opened = KnowledgeBase.open(tmp_path / "elsewhere", HashEmbedder(), state=handbook)
    assert [d.name for d in opened.documents()[0]] == ["leave.md"]


def test_another_embedder_is_refused_in_one_line(pg_url: str, tmp_path: Path) -> None:
    fill(on_postgres(pg_url, tmp_path / "a"), write_docs(tmp_path / "docs")[:1])
    kb = KnowledgeBase(tmp_path / "b", HashEmbedder(), state=StateDB(pg_url, MANIFEST, scope="handbook"))
    kb.embedder.model_id = "other-embedder"  # type: ignore[misc]
    with pytest.raises(KnowledgeBaseError, match="built with embedder 'hash-embedder'") as err:
        kb.warm_up()
    assert "\n" not in str(err.value)


# -- the write lock: an advisory lock per knowledge base name ----------------------------------
HOLDER = """
import sys, time
from crag.state import MANIFEST, StateDB
from crag.store.documents import DocumentRecord
from crag.store.writelock_db import AdvisoryWriteLock
with AdvisoryWriteLock(StateDB(sys.argv[1], MANIFEST, scope="handbook")).hold():
    print("held", flush=True)
    time.sleep(600)
"""


def test_one_writer_at_a_time_per_name_and_a_killed_writer_leaves_no_lock(pg_url: str) -> None:
    lock = AdvisoryWriteLock(StateDB(pg_url, MANIFEST, scope="handbook"))
    other = AdvisoryWriteLock(StateDB(pg_url, MANIFEST, scope="roadmaps"))
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, pg_url], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        assert lock.try_hold() is None
        with pytest.raises(KnowledgeBaseError, match="being written by another process") as err:
            with lock.hold(timeout=0.5, what="ingest"):
                pass
        assert "\n" not in str(err.value) and "cannot ingest" in str(err.value)
        held = other.try_hold()  # another knowledge base's lock is free
        assert held is not None
        with held:
            pass
    finally:
        proc.kill()  # kill -9 mid-write: the database ends its session and the lock with it
        proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while (held := lock.try_hold()) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert held is not None
    with held:
        with lock.hold(timeout=0.1):  # the holding thread may take it again
            pass


def test_a_second_thread_waits_for_the_first(pg_url: str) -> None:
    lock = AdvisoryWriteLock(StateDB(pg_url, MANIFEST, scope="handbook"))
    events: list[str] = []

    def second() -> None:
        events.append("busy" if lock.try_hold() is None else "free")
        with lock.hold(timeout=30):
            events.append("second holds")

    with lock.hold():
        worker = threading.Thread(target=second)
        worker.start()
        time.sleep(1.0)
        events.append("first releases")
    worker.join(timeout=30)
    assert events == ["busy", "first releases", "second holds"]


# -- a knowledge base built before kb.state_uri was set -----------------------------------------
def test_a_sqlite_knowledge_base_moves_into_the_database_once_and_still_answers(pg_url: str, tmp_path: Path) -> None:
    import shutil

    from crag.engine import CRAG

    legacy = tmp_path / "kb"
    shutil.copytree(Path(__file__).parent / "legacy_kb", legacy)  # built by the release before documents
    before = (legacy / "manifest.sqlite").read_bytes()
    with sqlite3.connect(legacy / "manifest.sqlite") as db:
        ids = {r[0] for r in db.execute("SELECT id FROM chunks")}

    rag = CRAG.from_config(kb={"path": str(legacy), "state_uri": pg_url, "name": "legacy"}, search={"provider": "none"})
    kb = rag.knowledge_base()
    assert isinstance(kb.manifest, ManifestDB)
    assert kb.manifest.chunk_ids() == ids and kb.manifest.generation == 2
    assert sorted(d.name for d in kb.documents()[0]) == ["lighthouse.md", "tianjin.md"]  # rows made on the way
    assert "1940" in kb.search("天津犹太会堂是什么时候建成的？", k=1)[0].chunk.text
    assert (legacy / "manifest.sqlite").read_bytes() == before  # the file is left as it was

    again = CRAG.from_config(kb={"path": str(legacy), "state_uri": pg_url, "name": "legacy"})
    assert again.knowledge_base().manifest.counts() == (2, 2)  # copied once, not twice
    elsewhere = CRAG.from_config(kb={"path": str(tmp_path / "empty"), "state_uri": pg_url, "name": "legacy"})
    assert elsewhere.kb_exists() and elsewhere.knowledge_base().documents()[1] == 2
