"""Build ``tests/state/legacy_kb``: a knowledge base as the release before ``crag.state`` wrote it.

The upgrade test (``test_upgrade.py``) opens a copy of that folder with the current code and
checks that every state file is migrated in place, keeps its rows, and that the knowledge
base still answers. The folder was built once by this script, run from a checkout of the
commit before the state layer (4f13585) with the bundled embedder and LLM::

    PYTHONPATH=src python tests/state/build_legacy_kb.py tests/state/legacy_kb

It ingests two small documents (one Chinese, one English), asks three questions with a
corpus search provider (so the search cache, the daily budget and the traces all get rows),
and rates two of the traces; the search corpus's index (``corpora/``) is left out. Running
it again on current code would build a current knowledge base, not a legacy one: the
committed folder is the fixture.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

DOCS = {
    "tianjin.md": "# 天津犹太会堂\n\n天津犹太会堂位于天津市和平区，建成于1940年，是华北地区唯一的犹太会堂建筑。"
    "会堂由犹太社区集资修建，采用了折衷主义风格。\n",
    "lighthouse.md": "# Old Harbour Lighthouse\n\nThe Old Harbour Lighthouse was built in 1873 by the engineer "
    "Margaret Hale. Its lamp was converted to electricity in 1921, and it was decommissioned in 1987.\n",
}
CORPUS = [
    {"id": "web-1", "title": "Harbour museum", "text": "The harbour museum opened in 1990 next to the old lighthouse."},
    {"id": "web-2", "title": "天津五大道", "text": "五大道位于天津市和平区，保存了两千多所风格各异的小洋楼。"},
]
QUESTIONS = [
    "天津犹太会堂是什么时候建成的？",
    "Who built the Old Harbour Lighthouse?",
    "When did the harbour museum open?",
]


def build(out: Path) -> None:
    from crag import CRAG

    if out.exists():
        shutil.rmtree(out)
    src = out.parent / f"{out.name}-src"
    src.mkdir(parents=True, exist_ok=True)
    for name, text in DOCS.items():
        (src / name).write_text(text, "utf-8")
    corpus = src / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in CORPUS), "utf-8")
    rag = CRAG.from_config(
        kb={"path": str(out)},
        search={"provider": "corpus", "corpus_path": str(corpus)},
        correction={"per_day_llm_tokens": 1_000_000, "per_day_searches": 1000},
    )
    rag.ingest([src / name for name in DOCS])
    ids = []
    for question in QUESTIONS:
        answer = rag.ask(question)
        print(answer.action.value, answer.answer, file=sys.stderr)
        ids.append(answer.trace_id)
    rag.traces.rate(ids[0], "up", "正确")
    rag.traces.rate(ids[1], "down", "missing the year")
    shutil.rmtree(src)
    shutil.rmtree(out / "corpora")  # the search corpus's own index: not state, and half the size


if __name__ == "__main__":
    build(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/state/legacy_kb"))
