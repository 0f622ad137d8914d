"""Recording searches to a cassette and replaying them offline."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from crag.errors import ConfigError, SearchError
from crag.search.replay import RecordingSearch, ReplaySearch, wrap_search
from crag.types import WebResult

pytestmark = pytest.mark.unit


class Scripted:
    """A WebSearch answering from a dict; counts calls and can fail on demand."""

    name = "scripted"

    def __init__(self, answers: dict[str, list[WebResult]]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, int]] = []

    def search(self, query: str, *, k: int) -> list[WebResult]:
        self.calls.append((query, k))
        if query == "boom":
            raise SearchError("scripted: down", backend_id="scripted", step="search")
        return self.answers.get(query, [])[:k]


BEIJING = WebResult(
    title="北京市 - 维基百科",
    url="https://zh.wikipedia.org/wiki/北京市",
    content="北京市是中华人民共和国的首都。",
    snippet="北京市是中华人民共和国的首都。",
    published="2024-05-18T08:30:00Z",
    score=0.9,
    provider="scripted",
)
PARIS = WebResult(title="Paris", url="https://example.org/paris", content="Paris is the capital of France.")


def test_record_then_replay_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "cassettes" / "run.json"  # parent is created
    inner = Scripted({"中国的首都": [BEIJING], "capital of France": [PARIS]})
    rec = RecordingSearch(inner, path)
    assert rec.name == "scripted"
    assert rec.search("中国的首都", k=3) == [BEIJING]
    assert rec.search("capital of France", k=5) == [PARIS]
    assert rec.search("nothing", k=5) == []

    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["version"] == 1
    assert [(e["provider"], e["query"], e["k"]) for e in data["entries"]] == [
        ("scripted", "中国的首都", 3),
        ("scripted", "capital of France", 5),
        ("scripted", "nothing", 5),
    ]
    assert "北京市" in path.read_text(encoding="utf-8")  # readable, not \\u-escaped

    replay = ReplaySearch(path)
    assert replay.search("中国的首都", k=3) == [BEIJING]
    assert replay.search("capital of France", k=5) == [PARIS]
    assert replay.search("nothing", k=5) == []  # an empty answer replays as empty
    assert replay.providers == {"scripted"}


def test_replay_miss_names_file_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    RecordingSearch(Scripted({"q": [PARIS]}), path).search("q", k=3)
    replay = ReplaySearch(path)
    for query, k in [("q", 5), ("other", 3), ("Q", 3)]:  # exact match on (query, k)
        with pytest.raises(SearchError, match="not in cassette") as info:
            replay.search(query, k=k)
        msg = str(info.value)
        assert str(path) in msg and "--search-record" in msg and "\n" not in msg


def test_recording_extends_existing_cassette_and_latest_wins(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    RecordingSearch(Scripted({"q": [PARIS]}), path).search("q", k=3)
    RecordingSearch(Scripted({"q": [BEIJING], "r": [PARIS]}), path).search("q", k=3)
    entries = json.loads(path.read_text(encoding="utf-8"))["entries"]
    assert len(entries) == 2
    assert ReplaySearch(path).search("q", k=3) == [BEIJING]


def test_failed_searches_are_not_recorded(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    rec = RecordingSearch(Scripted({}), path)
    with pytest.raises(SearchError, match="down"):
        rec.search("boom", k=3)
    assert not path.exists()


def test_atomic_write_leaves_no_temp_files_and_survives_threads(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    rec = RecordingSearch(Scripted({f"q{i}": [PARIS] for i in range(8)}), path)
    threads = [threading.Thread(target=rec.search, args=(f"q{i}",), kwargs={"k": 2}) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]
    replay = ReplaySearch(path)
    assert all(replay.search(f"q{i}", k=2) == [PARIS] for i in range(8))


def test_replay_ignores_unknown_fields_and_fills_missing(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "entries": [
                    {
                        "provider": "x",
                        "query": "q",
                        "k": 1,
                        "results": [{"url": "https://a.org", "future": 1}],
                    }
                ],
            }
        ),
        encoding="utf-8",
    )
    (result,) = ReplaySearch(path).search("q", k=1)
    assert result == WebResult(title="", url="https://a.org", content="")


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"entries": {}}',
        '{"entries": [{"query": "q"}]}',
        '{"entries": [{"query": 1, "k": 1}]}',
    ],
)
def test_broken_cassette_is_a_config_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.json"):
        ReplaySearch(path)
    with pytest.raises(ConfigError, match=r"bad\.json"):
        RecordingSearch(Scripted({}), path)  # refuses to overwrite what it cannot read


def test_malformed_result_is_a_search_error(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"entries": [{"query": "q", "k": 1, "results": ["x"]}]}), encoding="utf-8")
    with pytest.raises(SearchError, match="malformed"):
        ReplaySearch(path).search("q", k=1)


def test_missing_cassette(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found; record one with --search-record"):
        ReplaySearch(tmp_path / "nope.json")


def test_wrap_search(tmp_path: Path) -> None:
    inner = Scripted({"q": [PARIS]})
    assert wrap_search(inner, None, None) is inner
    recording = wrap_search(inner, tmp_path / "c.json", None)
    assert isinstance(recording, RecordingSearch)
    recording.search("q", k=2)
    replay = wrap_search(None, None, tmp_path / "c.json")
    assert isinstance(replay, ReplaySearch) and replay.search("q", k=2) == [PARIS]
    assert len(inner.calls) == 1  # replay never called the provider
    with pytest.raises(ConfigError, match="cannot be used together"):
        wrap_search(inner, tmp_path / "a.json", tmp_path / "c.json")
    with pytest.raises(ConfigError, match="no search provider"):
        wrap_search(None, None, None)
