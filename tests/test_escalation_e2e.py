"""Escalation end to end: a refusal on the Correct path searches, with every real component.

The internal knowledge base holds a passage *about* the question's subject that does not
answer it; the trained evaluator grades it Correct, the default 1.5B model finds no answer
in it (or invents one the grounding check rejects), so the engine searches the external
corpus once and answers from what it finds. Chinese: a data/hard question whose gold
paragraph is only in the external corpus; English: a passage about the Eiffel Tower that
never gives its height.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crag import CRAG
from crag.types import Action
from llm_fixtures import project_cache_dir

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
HARD = ROOT / "data" / "hard"

EIFFEL = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It is named after the "
    "engineer Gustave Eiffel, whose company designed and built the tower from 1887 to 1889.\n\n"
    "Locally nicknamed La dame de fer, the Eiffel Tower was constructed as the centrepiece of the 1889 World's Fair. "
    "It was initially criticised by some of France's leading artists and intellectuals for its design."
)
WEB = [
    {"title": "Eiffel Tower height", "url": "https://example.org/eiffel",
     "text": "The Eiffel Tower is 330 metres (1,083 ft) tall, about the same height as an 81-storey building."},
    {"title": "Louvre", "url": "https://example.org/louvre", "text": "The Louvre is the world's most-visited museum."},
]  # fmt: skip


def _engine(tmp: Path, internal: Path, corpus: Path) -> CRAG:
    import os

    os.environ.setdefault("CRAG_CACHE_DIR", str(project_cache_dir()))
    engine = CRAG.from_config(
        kb={"path": tmp / "kb"},
        search={"provider": "corpus", "corpus_path": corpus},
        # The corpus is embedded on the first search: on a cold cache that is not the search's own time.
        correction={"search_timeout": 120},
    )
    report = engine.ingest([internal])
    assert report.count("added") == 1 and not report.skipped
    return engine


def _assert_escalated(engine: CRAG, question: str, gold: str) -> None:
    answer = engine.ask(question)
    trace = engine.traces.get(answer.trace_id)
    assert trace["escalated"]["from"] == "correct", trace.get("escalated")  # graded Correct at first
    assert trace["escalated"]["reply"] and trace["escalated"]["rejected"]  # the first reply, kept
    assert answer.action is Action.AMBIGUOUS and trace["action"] == "ambiguous"
    assert {s.origin for s in answer.context} == {"internal", "web"}
    assert not answer.refused and gold in answer.answer, answer.answer
    assert any(c.url for c in answer.citations)  # cites what the search found


def test_english_on_topic_passage_without_the_answer_escalates(tmp_path: Path) -> None:
    internal, web = tmp_path / "internal", tmp_path / "web"
    internal.mkdir()
    web.mkdir()
    (internal / "eiffel.txt").write_text(EIFFEL, "utf-8")
    (web / "web.jsonl").write_text("\n".join(json.dumps(r) for r in WEB) + "\n", "utf-8")
    _assert_escalated(_engine(tmp_path, internal, web), "How tall is the Eiffel Tower?", "330")


def test_chinese_data_hard_question_escalates_to_the_external_corpus(tmp_path: Path) -> None:
    # 香港杜鹃: the KB keeps the article's botanical paragraph; its other name is only external.
    rows = [r for r in (HARD / "internal" / "zh.jsonl").read_text("utf-8").splitlines() if '"香港杜鹃"' in r]
    assert len(rows) == 1 and "白马银花" not in rows[0]
    internal = tmp_path / "internal.jsonl"
    internal.write_text(rows[0] + "\n", "utf-8")
    # The external corpus: the gold paragraph among the first 60 Chinese passages of data/hard's.
    corpus = [r for r in (HARD / "external" / "corpus.jsonl").read_text("utf-8").splitlines() if '"cmrc-' in r]
    web = tmp_path / "web"
    web.mkdir()
    lines = dict.fromkeys([*corpus[:60], *(r for r in corpus if "白马银花" in r)])
    (web / "corpus.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    _assert_escalated(_engine(tmp_path, internal, web), "香港杜鹃的别称是什么？", "白马银花")
