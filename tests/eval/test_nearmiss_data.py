"""Shape and consistency of the near-miss set (data/nearmiss, built by scripts/build_nearmiss.py).

What makes it a near-miss set must stay true: a third of the questions in each language have
their answer nowhere while documents about the same entity exist, a quarter are answered by a
table cell, some only by the external corpus; every gold answer is in the document it is said
to come from (read the way ingest reads it), no external or unanswerable answer is in the
internal documents, and the evaluator pairs' train and test companies are disjoint. The training
pairs' labels hold (scripts/check_nearmiss_pairs.py), a third of their questions are asked in the
other language than their passages, and their tables come both as raw text and as crag ingests them.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from crag.eval.datasets import load_dataset
from crag.eval.metrics import gold_match
from crag.grade.train import load_pairs
from crag.ingest.load import load_file

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SET = ROOT / "data" / "nearmiss"
LANGS = ("zh", "en")
# Names of the dev set's companies, products and people: never in the training pairs.
DEV_NAMES = ("Kestrel", "红隼", "Yunque", "云雀", "Qinglan", "青岚", "Larkspur", "Wang Lei", "王磊", "陈静",
             "Priya Natarajan", "周明远", "赵启明")  # fmt: skip


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def questions() -> list[dict]:
    return _read(SET / "questions.jsonl")


@pytest.fixture(scope="module")
def internal() -> dict[str, str]:
    """Each internal file's text as ingest reads it, keyed by its path relative to the set."""
    texts = {}
    for folder in ("internal", "kestrel"):
        for path in sorted((SET / folder).rglob("*")):
            if path.is_file():
                docs, _ = load_file(path)
                texts[path.relative_to(SET).as_posix()] = "\n".join(f"{d.title}\n{d.text}" for d in docs)
    return texts


@pytest.fixture(scope="module")
def external() -> dict[str, str]:
    return {r["id"]: f"{r['title']}\n{r['text']}" for r in _read(SET / "external" / "corpus.jsonl")}


def test_loads_as_an_eval_dataset_half_per_language(questions: list[dict]) -> None:
    items = load_dataset(SET / "questions.jsonl")
    assert len(items) >= 120
    per_lang = Counter(it.lang for it in items)
    assert set(per_lang) == set(LANGS)
    assert all(abs(n - len(items) / 2) <= len(items) * 0.1 for n in per_lang.values()), per_lang
    assert all(it.answerable == (q["kind"] != "unanswerable") for it, q in zip(items, questions, strict=True))


@pytest.mark.parametrize("lang", LANGS)
def test_proportions_of_each_kind_per_language(questions: list[dict], lang: str) -> None:
    mine = [q for q in questions if q["lang"] == lang]
    kinds = Counter(q["kind"] for q in mine)
    assert kinds["unanswerable"] >= len(mine) / 3, kinds
    assert kinds["table"] >= len(mine) / 4, kinds
    assert kinds["external"] >= 5, kinds
    assert kinds["text"] >= 10, kinds
    # each way of being close is represented
    misses = Counter(q["miss"] for q in mine if q["kind"] == "unanswerable")
    assert {"other_attribute", "other_entity", "other_period", "silent", "unnamed_role"} <= set(misses), misses
    # tables of each format answer questions
    formats = {Path(q["source"]).suffix for q in mine if q["kind"] == "table"}
    assert {".md", ".html", ".docx"} <= formats, formats


def test_the_four_reported_cases_are_asked_in_both_languages(questions: list[dict], internal: dict[str, str]) -> None:
    cases = Counter((q.get("case"), q["lang"]) for q in questions if q.get("case"))
    assert {(c, lang) for c in ("ceo", "car", "battery", "wang_lei") for lang in LANGS} <= set(cases)
    battery = next(q for q in questions if q.get("case") == "battery" and q["lang"] == "en")
    assert battery["source"].startswith("kestrel/") and battery["cross_lingual"]
    assert "5200 毫安时" in internal[battery["source"]]  # only the Chinese spec sheet holds it
    holders = [p for p, text in internal.items() if gold_match(text, ["5200", "5,200"])]
    assert holders == [battery["source"]]
    assert "8,640" in internal["kestrel/shipments-by-quarter.md"]
    kestrel = "\n".join(t for p, t in internal.items() if p.startswith("kestrel/"))
    for absent in ("CEO", "chief executive", "首席执行官", "company car", "公司车", "配车"):
        assert absent.lower() not in kestrel.lower(), absent
    titles = [t.split("\n")[0] for p, t in internal.items() if p.startswith("kestrel/people/")]
    assert sorted(titles) == ["Wang Lei (engineer)", "Wang Lei (sales)"]  # two people, one name


def test_every_internal_gold_is_in_its_source_document(questions: list[dict], internal: dict[str, str]) -> None:
    for q in questions:
        if q["gold_location"] != "internal":
            continue
        text = internal[q["source"]]
        if q.get("answers_all"):  # a shared name: every bearer's description is somewhere internal
            assert all(any(gold_match(t, [a]) for t in internal.values()) for a in q["answers"]), q["id"]
        else:
            assert gold_match(text, q["answers"]), (q["id"], q["answers"], q["source"])


def test_external_answers_are_only_external(
    questions: list[dict], internal: dict[str, str], external: dict[str, str]
) -> None:
    asked = [q for q in questions if q["gold_location"] == "external"]
    assert asked
    for q in asked:
        assert gold_match(external[q["source"]], q["answers"]), (q["id"], q["answers"])
        leaks = [p for p, text in internal.items() if gold_match(text, q["answers"])]
        assert not leaks, (q["id"], leaks)


def test_unanswerable_questions_are_close_to_a_real_document(
    questions: list[dict], internal: dict[str, str], external: dict[str, str]
) -> None:
    for q in questions:
        if q["kind"] != "unanswerable":
            continue
        assert q["answers"] == [] and q["gold_location"] == "none"
        assert q["source"] in internal or q["source"] in external, q["source"]  # the near miss exists
        # distractors are values near by (some translated, as a wrong answer would write them)
        corpus = "\n".join([*internal.values(), *external.values()])
        if q.get("distractors"):
            assert gold_match(corpus, q["distractors"]), q["id"]


def test_the_kestrel_folder_is_small_and_self_contained(questions: list[dict]) -> None:
    files = [p for p in (SET / "kestrel").rglob("*") if p.is_file()]
    assert 8 <= len(files) <= 12
    for q in questions:
        if q.get("case") and q["gold_location"] != "external":
            assert q["source"].startswith("kestrel/"), q["id"]


def test_evaluator_pairs_are_labelled_and_split_by_company() -> None:
    test = load_pairs(SET / "pairs_test.jsonl")  # what `crag evaluator train` reads
    train = load_pairs(SET / "pairs_train.jsonl")
    assert len(train) >= 2000
    for lang in LANGS:
        mine = Counter(p["label"] for p in test if p["lang"] == lang)
        assert mine[0] + mine[1] >= 150 and mine[1] >= 30 and mine[0] >= 100, (lang, mine)
        assert all(Counter(p["label"] for p in train if p["lang"] == lang).values())
    assert {p["kind"] for p in test} | {p["kind"] for p in train} == {"positive", "near_miss"}
    assert not {p["title"] for p in test} & {p["title"] for p in train}
    assert not {p["entity"] for p in test} & {p["entity"] for p in train}
    text = "\n".join(p["query"] + p["passage"] for p in train)
    assert not [n for n in DEV_NAMES if n in text]


def test_test_pairs_positives_hold_a_gold_answer(questions: list[dict]) -> None:
    by_id = {q["id"]: q for q in questions}
    for p in _read(SET / "pairs_test.jsonl"):
        q = by_id[p["qid"]]
        assert p["query"] == q["question"]
        assert gold_match(p["passage"], q["answers"]) == bool(p["label"]), (p["qid"], p["passage"][:80])


def _checker():  # scripts/check_nearmiss_pairs.py, the label checker (scripts are not a package)
    spec = importlib.util.spec_from_file_location("check_nearmiss_pairs", ROOT / "scripts" / "check_nearmiss_pairs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_training_labels_hold_and_the_checker_sees_a_wrong_one() -> None:
    check = _checker()
    train, test = check.read(SET / "pairs_train.jsonl"), check.read(SET / "pairs_test.jsonl")
    assert check.problems(train, test) == []
    positive = next(p for p in train if p["label"] and p["table_form"] == "rows")
    near = next(p for p in train if p["query"] == positive["query"] and not p["label"])
    wrong = [positive | {"label": 0}, near | {"passage": positive["passage"], "table_form": "rows"}]
    assert len(check.problems(wrong, test)) == 2


def test_training_questions_cross_languages_and_tables_come_in_every_form() -> None:
    train = _read(SET / "pairs_train.jsonl")
    for lang in LANGS:
        mine = [p for p in train if p["lang"] == lang]
        cross = [p for p in mine if p["passage_lang"] != lang]
        assert 0.25 <= len(cross) / len(mine) <= 0.4, (lang, len(cross), len(mine))
        assert Counter(p["label"] for p in cross)[1] >= 100  # positives and near misses alike
    forms = Counter((p["table_form"], p["label"]) for p in train if p["table_form"])
    assert {(f, label) for f in ("pipe", "markdown", "rows") for label in (0, 1)} == set(forms), forms
    assert sum(n for (f, _), n in forms.items() if f == "rows") >= sum(forms.values()) * 0.4
    for p in train:  # a row: its key, then "column: value" cells; rows between blank lines, under a caption
        if p["table_form"] == "rows":
            caption, *rows = p["passage"].split("\n\n")
            assert " | " not in caption and rows, p["passage"]
            assert all(re.fullmatch(r"[^|\n]+( \| [^|\n:]+: [^|\n]+)+", row) for row in rows), p["passage"]


def test_row_form_is_what_crag_reads_from_the_markdown_form() -> None:
    markdown = pytest.importorskip("crag.ingest.markdown", reason="crag reads Markdown tables as rows")
    from crag.ingest.sections import Outline

    train = _read(SET / "pairs_train.jsonl")
    for p in [p for p in train if p["table_form"] == "markdown"][:200]:
        read = "".join(piece.text for piece in markdown.markdown_pieces(p["passage"], Outline()))
        caption, _, table = p["passage"].partition("\n\n")
        cells = [[c.strip() for c in line.strip("|").split("|")] for line in table.split("\n")]
        head = cells[0]
        rows = [" | ".join([r[0], *(f"{h}: {v}" for h, v in zip(head[1:], r[1:], strict=True))]) for r in cells[2:]]
        assert re.sub(r"\n\s*\n", "\n\n", read).strip() == "\n\n".join([caption, *rows])
