"""Dataset loading: every bad line is one InputError naming the file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crag.errors import InputError
from crag.eval.datasets import balanced_sample, load_dataset

pytestmark = pytest.mark.unit

GOOD = {"id": "q1", "question": "When was the Royal University of Warsaw established?", "answers": ["1816"]}


def write(tmp_path: Path, *lines: str | bytes) -> Path:
    p = tmp_path / "qa.jsonl"
    p.write_bytes(b"\n".join(x if isinstance(x, bytes) else x.encode("utf-8") for x in lines) + b"\n")
    return p


def test_loads_defaults_and_extras(tmp_path: Path) -> None:
    zh = {"question": "天津犹太会堂是什么时候建成的？", "answers": ["1940年"], "expected_action": "correct"}
    items = load_dataset(write(tmp_path, json.dumps(GOOD), "", json.dumps(zh, ensure_ascii=False)))
    assert [i.id for i in items] == ["q1", f"{tmp_path / 'qa.jsonl'}:3"]
    assert items[0].lang == "en" and items[1].lang == "zh"  # detected when absent
    assert items[1].type == "unknown" and items[1].group("expected_action") == "correct"


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    p = tmp_path / "bom.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + json.dumps(GOOD).encode())
    assert load_dataset(p)[0].id == "q1"


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ('{"question": "x", "answers": ["a"]', "invalid JSON"),
        ('["not", "an", "object"]', "expected a JSON object"),
        ('{"answers": ["a"]}', 'missing "question"'),
        ('{"question": "  ", "answers": ["a"]}', '"question" must be a non-empty string'),
        ('{"question": 42, "answers": ["a"]}', '"question" must be a non-empty string'),
        ('{"question": "x"}', 'missing "answers"'),
        ('{"question": "x", "answers": []}', '"answers" is empty'),
        ('{"question": "x", "answers": ["", " "]}', '"answers" is empty'),
        ('{"question": "x", "answers": "a"}', "must be a list of strings"),
        ('{"question": "x", "answers": [1]}', "must be a list of strings"),
        ('{"question": "x", "answers": ["a"], "id": [1]}', '"id" must be'),
        ('{"question": "x", "answers": ["a"], "type": 3}', '"type" must be a string'),
        ('{"question": "x", "answers": ["a"], "lang": "fr"}', '"lang" must be one of'),
        ('{"id": "q1", "question": "again", "answers": ["a"]}', "duplicated id 'q1' (first on line 1)"),
    ],
)
def test_bad_line_names_the_line(tmp_path: Path, bad: str, needle: str) -> None:
    p = write(tmp_path, json.dumps(GOOD), bad)
    with pytest.raises(InputError) as exc:
        load_dataset(p)
    msg = str(exc.value)
    assert f"{p}:2:" in msg and needle in msg and "\n" not in msg


def test_mixed_encoding_names_the_line(tmp_path: Path) -> None:
    latin = '{"question": "Café?", "answers": ["oui"]}'.encode("cp1252")
    p = write(tmp_path, json.dumps(GOOD), latin)
    with pytest.raises(InputError, match=r"qa\.jsonl:2: not valid UTF-8"):
        load_dataset(p)


def test_missing_empty_and_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load_dataset(tmp_path / "nope.jsonl")
    with pytest.raises(InputError, match="is a folder"):
        load_dataset(tmp_path)
    with pytest.raises(InputError, match="has no questions"):
        load_dataset(write(tmp_path, ""))


def test_balanced_sample_covers_groups_and_is_seeded() -> None:
    from crag.eval.datasets import EvalItem

    items = [
        EvalItem(f"{lang}{i}", "q", ["a"], lang, extra={"expected_action": act})
        for lang in ("zh", "en")
        for act in ("correct", "ambiguous", "incorrect")
        for i in range(5)
    ]
    keys = ("lang", "expected_action")
    six = balanced_sample(items, 6, seed=3, keys=keys)
    assert {(i.lang, i.extra["expected_action"]) for i in six} == {
        (lang, a) for lang in ("zh", "en") for a in ("correct", "ambiguous", "incorrect")
    }
    assert [i.id for i in six] == [i.id for i in balanced_sample(items, 6, seed=3, keys=keys)]
    assert balanced_sample(items, None) == items
    with pytest.raises(InputError, match="--limit"):
        balanced_sample(items, 0)
