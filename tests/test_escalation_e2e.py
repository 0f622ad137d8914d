"""Escalation end to end: a Correct grade that the evidence does not bear out searches, with every real component.

The internal knowledge base holds a passage *about* the question's subject that does not
answer it; the trained evaluator grades it Correct. Two rules then send the question to
the external corpus, each tested here with the default 1.5B model: the verification
before generation (the model does not read the answer in the kept strips:
``correction.verify_correct``), and, with it off, the refusal after generation (the model
finds no answer, or invents one the grounding check rejects: ``escalate_on_refusal``).
Chinese: a data/hard question whose gold paragraph is only in the external corpus;
English: a passage about the Eiffel Tower that never gives its height. And the control:
a question the internal passage does answer stays Correct, with no search.
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
    {"title": "Eiffel Tower weight", "url": "https://example.org/eiffel-weight",
     "text": "The metal structure of the Eiffel Tower weighs 7,300 tonnes; the whole tower weighs 10,100 tonnes."},
    {"title": "Louvre", "url": "https://example.org/louvre", "text": "The Louvre is the world's most-visited museum."},
]  # fmt: skip


def _engine(tmp: Path, internal: Path, corpus: Path, *, verify: bool = True, upper: float | None = None) -> CRAG:
    import os

    os.environ.setdefault("CRAG_CACHE_DIR", str(project_cache_dir()))
    engine = CRAG.from_config(
        kb={"path": tmp / "kb"},
        search={"provider": "corpus", "corpus_path": corpus},
        # The corpus is embedded on the first search: on a cold cache that is not the search's own time.
        correction={"search_timeout": 120, "verify_correct": verify},
        **({"evaluator": {"upper": upper}} if upper is not None else {}),
    )
    report = engine.ingest([internal])
    assert report.count("added") == 1 and not report.skipped
    return engine


def _assert_escalated(engine: CRAG, question: str, gold: str, *, by: str) -> None:
    answer = engine.ask(question)
    trace = engine.traces.get(answer.trace_id)
    assert trace["escalated"]["from"] == "correct", trace.get("escalated")  # graded Correct at first
    if by == "verification":  # before any answer: the model did not read one in the strips
        assert trace["escalated"]["rejected"] == "not verified" and not trace["escalated"]["reply"]
        assert trace["verification"]["probability"] < trace["verification"]["threshold"]
    else:
        assert trace["escalated"]["reply"] and trace["escalated"]["rejected"]  # the first reply, kept
    assert answer.action is Action.AMBIGUOUS and trace["action"] == "ambiguous"
    assert {s.origin for s in answer.context} == {"internal", "web"}
    assert not answer.refused and gold in answer.answer, answer.answer
    assert any(c.url for c in answer.citations)  # cites what the search found


def _eiffel(tmp_path: Path) -> tuple[Path, Path]:
    internal, web = tmp_path / "internal", tmp_path / "web"
    internal.mkdir()
    web.mkdir()
    (internal / "eiffel.txt").write_text(EIFFEL, "utf-8")
    (web / "web.jsonl").write_text("\n".join(json.dumps(r) for r in WEB) + "\n", "utf-8")
    return internal, web


def _hongkong(tmp_path: Path) -> tuple[Path, Path]:
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
    return internal, web


def test_english_on_topic_passage_without_the_answer_escalates_on_refusal(tmp_path: Path) -> None:
    engine = _engine(tmp_path, *_eiffel(tmp_path), verify=False)
    _assert_escalated(engine, "How tall is the Eiffel Tower?", "330", by="refusal")


def test_english_correct_is_verified_before_it_is_trusted(tmp_path: Path) -> None:
    # The 1.5B check catches about 70 % of on-topic passages without the answer (held-out pairs,
    # benchmarks/verify_correct.py): this one (no weight anywhere in it) is caught, and the
    # question is searched before any answer is written. The refusal rule stays the backstop.
    # The trained evaluator already grades this passage below τ_high (0.67: it never says
    # "weigh"); a lenient τ_high of 0.6 puts it on the Correct path, where the check must catch it.
    engine = _engine(tmp_path, *_eiffel(tmp_path), upper=0.6)
    _assert_escalated(engine, "How much does the Eiffel Tower weigh?", "10,100", by="verification")
    # The control: what the internal passage does answer is verified and stays Correct, unsearched.
    answer = engine.ask("Who designed and built the Eiffel Tower?")
    trace = engine.traces.get(answer.trace_id)
    assert answer.action is Action.CORRECT and "escalated" not in trace and not trace.get("external")
    assert trace["verification"]["confirmed"] and trace["verification"]["probability"] is not None
    assert "Eiffel" in answer.answer and not answer.refused


@pytest.mark.parametrize("by", ["verification", "refusal"])
def test_chinese_data_hard_question_escalates_to_the_external_corpus(tmp_path: Path, by: str) -> None:
    engine = _engine(tmp_path, *_hongkong(tmp_path), verify=by == "verification")
    _assert_escalated(engine, "香港杜鹃的别称是什么？", "白马银花", by=by)
