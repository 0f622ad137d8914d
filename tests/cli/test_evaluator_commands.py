"""`crag grade`, `crag calibrate`: real evaluators, bad input, no partial outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tomllib
from typer.testing import CliRunner

from crag.cli import app
from crag.grade.calibrate import choose_thresholds, evaluate_thresholds

runner = CliRunner()

PAIRS = [
    {"query": "中国的首都是哪里？", "passage": "北京是中华人民共和国的首都。", "label": 1},
    {"query": "中国的首都是哪里？", "passage": "光合作用是植物利用光能合成有机物的过程。", "label": 0},
    {"query": "When was the Eiffel Tower completed?", "passage": "The Eiffel Tower was completed in 1889.", "label": 1},
    {"query": "When was the Eiffel Tower completed?", "passage": "Bananas are rich in potassium.", "label": 0},
    {"query": "Who wrote Hamlet?", "passage": "Hamlet is a tragedy written by William Shakespeare.", "label": 1},
    {"query": "Who wrote Hamlet?", "passage": "", "label": 0},  # empty passage must not crash
]


def write(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in rows), "utf-8")
    return path


@pytest.mark.integration
@pytest.mark.parametrize("evaluator", ["heuristic", "trained"])
def test_grade_keeps_order_and_adds_score(tmp_path: Path, evaluator: str) -> None:
    pairs = write(tmp_path / "pairs.jsonl", [{k: v for k, v in p.items() if k != "label"} for p in PAIRS])
    out = tmp_path / "graded.jsonl"
    res = runner.invoke(
        app, ["grade", "-i", str(pairs), "--evaluator", evaluator, "-o", str(out), "--kb", str(tmp_path)]
    )
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in out.read_text("utf-8").splitlines()]
    assert [r["passage"] for r in rows] == [p["passage"] for p in PAIRS]
    assert all(0.0 <= r["score"] <= 1.0 and isinstance(r["reason"], str) for r in rows)
    for i in (0, 2, 4):  # the relevant passage outscores the irrelevant one of the same query
        assert rows[i]["score"] > rows[i + 1]["score"]


@pytest.mark.integration
def test_calibrate_writes_thresholds_and_plot(tmp_path: Path) -> None:
    labels = write(tmp_path / "labels.jsonl", PAIRS)
    cfg = tmp_path / "crag.toml"
    cfg.write_text("[retrieval]\ntop_k = 4\n", "utf-8")
    plot = tmp_path / "rel.png"
    res = runner.invoke(
        app,
        [
            "calibrate",
            "--labels",
            str(labels),
            "--evaluator",
            "trained",
            "--plot",
            str(plot),
            "--write-config",
            str(cfg),
            "--kb",
            str(tmp_path),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "auroc" in res.output and plot.stat().st_size > 1000
    data = tomllib.loads(cfg.read_text("utf-8"))
    assert data["retrieval"]["top_k"] == 4  # the rest of the file is kept
    assert 0 <= data["evaluator"]["lower"] < data["evaluator"]["upper"] <= 1


@pytest.mark.unit
@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "line 2: not valid JSON"),
        ('{"passage": "x", "label": 1}', "line 2: field 'query'"),
        ('{"query": "q", "passage": 5, "label": 1}', "line 2: field 'passage'"),
        ('{"query": "q", "passage": "p", "label": "yes"}', "line 2: field 'label' must be 0 or 1"),
        ('{"query": "q", "passage": "p"}', "line 2: field 'label'"),
        ("[1, 2]", "line 2: expected a JSON object"),
    ],
)
def test_bad_labels_file_names_the_line(tmp_path: Path, line: str, message: str) -> None:
    labels = write(tmp_path / "labels.jsonl", [PAIRS[0], line])
    res = runner.invoke(app, ["calibrate", "--labels", str(labels), "--kb", str(tmp_path)])
    assert res.exit_code == 2
    assert message in " ".join(res.output.split())


@pytest.mark.unit
def test_grade_failure_leaves_no_output_file(tmp_path: Path) -> None:
    pairs = write(tmp_path / "pairs.jsonl", [PAIRS[0], '{"query": "q"}'])
    out = tmp_path / "graded.jsonl"
    res = runner.invoke(app, ["grade", "-i", str(pairs), "-o", str(out), "--kb", str(tmp_path)])
    assert res.exit_code == 2 and not out.exists()
    assert not list(tmp_path.glob(".graded.jsonl.*"))


@pytest.mark.unit
def test_missing_model_file_is_a_clear_error(tmp_path: Path) -> None:
    pairs = write(tmp_path / "pairs.jsonl", [PAIRS[0]])
    cfg = tmp_path / "crag.toml"
    cfg.write_text(f'[evaluator]\nbackend = "trained"\nmodel_path = "{tmp_path / "nope.npz"}"\n', "utf-8")
    res = runner.invoke(app, ["grade", "-i", str(pairs), "-c", str(cfg), "--kb", str(tmp_path)])
    assert res.exit_code == 2 and "nope.npz" in res.output and "Traceback" not in res.output


@pytest.mark.unit
def test_threshold_search_prefers_cheaper_routing_under_cost() -> None:
    y = [1] * 50 + [0] * 50
    s = [0.9] * 40 + [0.5] * 10 + [0.1] * 40 + [0.5] * 10
    acc = choose_thresholds(y, s)
    assert acc.accuracy >= 0.9 and acc.lower < 0.5 < acc.upper
    # Trusting the 0.5 band would be wrong half the time: an expensive mistake under "cost".
    costly = choose_thresholds(y, s, objective="cost", cost_wrong=100)
    assert costly.upper > 0.5
    c = evaluate_thresholds(y, s, 0.2, 0.8)
    assert c.precision_correct == 1.0 and c.recall_incorrect == 0.8
