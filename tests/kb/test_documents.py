"""Documents in the knowledge base: metadata kept across ingests, reused vectors, stable ids,
and knowledge bases from before documents had rows.

The real Chroma store and manifest; the hashing embedder counts what is embedded (control flow).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from crag.ingest.writer import METADATA_ONLY, DocName
from crag.kb import KnowledgeBase
from crag.store.documents import DOCUMENTS_IN_MANIFEST, path_id
from crag.testing.fakes import HashEmbedder

pytestmark = pytest.mark.integration


def write_docs(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.md").write_text("---\nlang: en\n---\n# A\n\nThe Zorblax river is 40 km long.\n", "utf-8")
    (folder / "b.txt").write_text("Quendia has three bridges over the Zorblax.", "utf-8")
    rows = [{"id": "r1", "text": "佐布拉克斯河长四十公里。", "metadata": {"lang": "zh"}}, {"text": "Row two."}]
    (folder / "rows.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", "utf-8")
    return folder


def embedded(embedder: HashEmbedder) -> int:
    return sum(len(c) for c in embedder.calls)


def test_metadata_is_kept_replaced_and_cleared_without_embedding_again(tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    embedder = HashEmbedder()
    kb = KnowledgeBase(tmp_path / "kb", embedder)
    assert kb.ingest([docs], metadata={"team": "hr"}).count("added") == 3
    first = embedded(embedder)
    plain = kb.ingest([docs])
    assert plain.count("unchanged") == 3 and plain.metadata_changed == 0 and embedded(embedder) == first
    assert kb.search("Zorblax river", k=5, filters={"team": "hr"})

    searched = embedded(embedder)  # (a search embeds its query)
    relabel = kb.ingest([docs], metadata={"team": "ops"})
    assert relabel.count("updated") == 3 and relabel.metadata_changed == 3
    assert {f.reason for f in relabel.files} == {METADATA_ONLY}
    assert embedded(embedder) == searched  # the text did not change: every vector was reused
    metas = {c.text: c.metadata for c in kb.manifest.chunks()}
    assert metas["佐布拉克斯河长四十公里。"] == {"team": "ops", "lang": "zh"}  # the line's own field stays
    assert kb.search("Zorblax river", k=5, filters={"team": "hr"}) == []
    assert len(kb.search("Zorblax river", k=5, filters={"team": "ops", "lang": "en"})) == 1
    assert kb.vectors.all_ids() == kb.manifest.chunk_ids()  # the old ids' vectors are gone

    cleared = kb.ingest([docs / "b.txt"], clear_metadata=True)
    assert cleared.metadata_changed == 1 and kb.manifest.document(str(docs / "b.txt")).metadata == {}  # type: ignore[union-attr]
    docs_now, total = kb.documents()
    assert total == 3 and [d.name for d in docs_now] == ["docs/a.md", "docs/b.txt", "docs/rows.jsonl"]
    assert [d.version for d in docs_now] == [2, 3, 2]
    assert docs_now[0].title == "A" and docs_now[0].id == path_id(str(docs / "a.md"))


def test_named_files_replace_the_document_that_held_the_id(tmp_path: Path) -> None:
    kb = KnowledgeBase(tmp_path / "kb", HashEmbedder())
    old, new = tmp_path / "v1" / "report.md", tmp_path / "v2" / "report.txt"
    old.parent.mkdir()
    new.parent.mkdir()
    old.write_text("# Report\n\nThe Quendia bridge is 40 m long.", "utf-8")
    new.write_text("The Quendia bridge is 45 m long.", "utf-8")
    kb.ingest([old], metadata={"team": "civil"}, names={str(old): DocName("q3", "report.md")})
    report = kb.ingest([new], names={str(new): DocName("q3", "report.txt")})
    assert [(f.status, f.document) for f in report.files] == [("updated", "q3")]
    doc = kb.document("q3")
    assert (doc.name, doc.version, doc.metadata, doc.file) == ("report.txt", 2, {"team": "civil"}, str(new))
    assert kb.manifest.files() == [str(new)]
    assert [h.chunk.text for h in kb.search("Quendia bridge", k=5)] == ["The Quendia bridge is 45 m long."]
    assert [f.document for f in kb.remove_documents(["q3", "nope"])] == ["q3"]
    assert kb.documents() == ([], 0) and kb.vectors.count() == 0


def test_a_knowledge_base_from_before_documents_gets_its_rows_once(tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    embedder = HashEmbedder()
    KnowledgeBase(tmp_path / "kb", embedder).ingest([docs], metadata={"team": "hr"})
    # Make it look old: no documents rows, and the files' versions as they were then.
    with sqlite3.connect(tmp_path / "kb" / "manifest.sqlite") as db:
        db.execute("DELETE FROM documents")
        db.execute("DELETE FROM meta WHERE key=?", (DOCUMENTS_IN_MANIFEST,))
    again = KnowledgeBase(tmp_path / "kb", embedder)  # opening it upgrades it
    docs_now, _ = again.documents()
    assert [(d.name, d.metadata) for d in docs_now] == [
        ("a.md", {"team": "hr", "lang": "en"}),  # what every chunk shares (front matter included)
        ("b.txt", {"team": "hr"}),
        ("rows.jsonl", {"team": "hr"}),
    ]
    before = embedded(embedder)
    plain = again.ingest([docs])  # the metadata stays; nothing is embedded again
    assert plain.count("added") == 0 and embedded(embedder) == before
    assert {tuple(sorted(c.metadata.items()))[-1] for c in again.manifest.chunks()} == {("team", "hr")}
