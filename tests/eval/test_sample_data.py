"""Consistency checks for the bundled bilingual sample data (built by scripts/build_sample_data.py)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
LANGS = ("zh", "en")
ACTIONS = ("correct", "ambiguous", "incorrect")


def _read(path: Path) -> list[dict]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        assert line.strip(), f"{path.name}:{n} is blank"
        rows.append(json.loads(line))
    return rows


@pytest.fixture(scope="module")
def internal() -> list[dict]:
    return _read(SAMPLE / "internal" / "zh.jsonl") + _read(SAMPLE / "internal" / "en.jsonl")


@pytest.fixture(scope="module")
def external() -> list[dict]:
    return _read(SAMPLE / "external" / "corpus.jsonl")


@pytest.fixture(scope="module")
def questions() -> list[dict]:
    return _read(SAMPLE / "questions.jsonl")


@pytest.fixture(scope="module")
def passages(internal, external) -> dict[str, dict]:
    return {p["id"]: p for p in internal + external}


def test_passage_lines_are_valid(internal, external):
    for name in ("zh", "en"):
        for p in _read(SAMPLE / "internal" / f"{name}.jsonl"):
            assert p["metadata"]["lang"] == name
    for p in internal + external:
        assert set(p) == {"id", "title", "text", "url", "metadata"}
        assert isinstance(p["id"], str) and p["id"]
        assert isinstance(p["title"], str) and p["title"]
        assert isinstance(p["text"], str) and p["text"] == p["text"].strip() and p["text"]
        assert isinstance(p["url"], str)
        meta = p["metadata"]
        assert meta["lang"] in LANGS
        assert meta["dataset"] in {"cmrc2018", "squad2.0"}
        assert (meta["lang"] == "zh") == (meta["dataset"] == "cmrc2018")
        assert isinstance(meta["source_id"], str) and meta["source_id"]
        assert len(p["text"]) <= 950, p["id"]
    ids = [p["id"] for p in internal + external]
    assert len(ids) == len(set(ids)), "passage ids must be unique across internal and external"


def test_internal_and_external_are_disjoint(internal, external):
    internal_texts = {p["text"] for p in internal}
    external_texts = {p["text"] for p in external}
    assert not internal_texts & external_texts
    assert len(external_texts) == len(external), "duplicate texts in the external corpus"
    assert len(internal_texts) == len(internal), "duplicate texts in the internal KB"


def test_passage_counts(internal, external):
    assert 40 <= len(internal) <= 60
    assert 120 <= len(external) <= 180
    for lang in LANGS:
        internal_titles = {p["title"] for p in internal if p["metadata"]["lang"] == lang}
        external_titles = {p["title"] for p in external if p["metadata"]["lang"] == lang}
        assert 8 <= len(internal_titles) <= 16
        # articles the internal KB lacks entirely
        assert len(external_titles - internal_titles) >= 5
        # and articles split across both
        assert len(external_titles & internal_titles) >= 8


def test_question_lines_are_valid(questions, passages):
    keys = {
        "id",
        "question",
        "answers",
        "lang",
        "expected_action",
        "gold_location",
        "gold_passage_id",
        "type",
    }
    ids = [q["id"] for q in questions]
    assert len(ids) == len(set(ids))
    for q in questions:
        assert keys <= set(q)
        assert q["question"].strip()
        assert q["lang"] in LANGS
        assert q["expected_action"] in ACTIONS
        assert q["gold_location"] in {"internal", "external"}
        assert isinstance(q["answers"], list) and q["answers"]
        assert all(isinstance(a, str) and a.strip() for a in q["answers"])
        assert isinstance(q["type"], str) and q["type"]
        assert q["gold_passage_id"] in passages
        assert passages[q["gold_passage_id"]]["metadata"]["lang"] == q["lang"]


def test_gold_answers_appear_in_gold_passage(questions, passages):
    for q in questions:
        text = passages[q["gold_passage_id"]]["text"]
        for answer in q["answers"]:
            assert answer in text, (q["id"], answer)


def test_gold_location_matches_files(questions, internal):
    internal_ids = {p["id"] for p in internal}
    for q in questions:
        assert (q["gold_passage_id"] in internal_ids) == (q["gold_location"] == "internal"), q["id"]
        assert (q["gold_location"] == "internal") == (q["expected_action"] == "correct"), q["id"]


def test_actions_match_internal_coverage(questions, passages, internal):
    internal_titles = {(p["metadata"]["lang"], p["title"]) for p in internal}
    internal_texts = {lang: [p["text"] for p in internal if p["metadata"]["lang"] == lang] for lang in LANGS}
    for q in questions:
        title = passages[q["gold_passage_id"]]["title"]
        covered = (q["lang"], title) in internal_titles
        if q["expected_action"] == "incorrect":
            assert not covered, f"{q['id']}: article {title!r} is in the internal KB"
        else:
            assert covered, f"{q['id']}: article {title!r} is missing from the internal KB"
        if q["expected_action"] != "correct":
            # the internal KB must not hold the answer anywhere
            for answer in q["answers"]:
                assert not any(answer in t for t in internal_texts[q["lang"]]), (q["id"], answer)


def test_question_counts(questions):
    counts = Counter((q["lang"], q["expected_action"]) for q in questions)
    for lang in LANGS:
        assert 50 <= sum(counts[lang, a] for a in ACTIONS) <= 70
        for action in ACTIONS:
            assert 15 <= counts[lang, action] <= 25, (lang, action, counts[lang, action])


def test_demo_questions_are_a_subset(questions):
    demo = _read(SAMPLE / "demo_questions.jsonl")
    assert len(demo) == 6
    by_id = {q["id"]: q for q in questions}
    for d in demo:
        assert by_id.get(d["id"]) == d
    assert {(d["lang"], d["expected_action"]) for d in demo} == {(lang, a) for lang in LANGS for a in ACTIONS}


def test_attribution_and_licence_present():
    attribution = (SAMPLE / "ATTRIBUTION.md").read_text(encoding="utf-8")
    for needle in ("CC BY-SA 4.0", "c0eb1b6b", "85623ade", "CMRC 2018", "SQuAD 2.0"):
        assert needle in attribution
    licence = (SAMPLE / "LICENCE-CC-BY-SA-4.0.txt").read_text(encoding="utf-8")
    assert "Attribution-ShareAlike 4.0 International" in licence
