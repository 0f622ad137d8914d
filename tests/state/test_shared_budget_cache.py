"""Budgets and caches shared by processes: one daily total, one cache, on PostgreSQL and SQLite.

Each worker process charges the same daily token budget in a loop until it is refused; what
they were granted together must never pass the limit, and must equal what the database says
was used (nothing charged twice, nothing lost).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crag.budget import Budget
from crag.config import CragSettings
from crag.errors import LLMBudgetExceeded
from crag.search.cache import CachedSearch
from crag.state import BUDGET, CACHE, state_for
from crag.testing.fakes import StaticWebSearch
from crag.types import WebResult

pytestmark = pytest.mark.integration

LIMIT = 10_000
STEP = 7  # tokens per charge: LIMIT is not a multiple, so the last grant must be refused exactly

# Runs in each worker: wait for the start time, then charge until refused; print what was granted.
CHARGER = """
import json, sys, time
from crag.budget import Budget
from crag.config import CragSettings
from crag.errors import LLMBudgetExceeded
from crag.state import BUDGET, state_for
settings = CragSettings(kb=json.loads(sys.argv[1]))
granted = 0
while time.time() < float(sys.argv[2]):
    time.sleep(0.005)
while True:
    budget = Budget(state_for(settings, BUDGET), per_day_tokens=int(sys.argv[3]))  # one per request
    try:
        budget.charge_tokens(int(sys.argv[4]))
    except LLMBudgetExceeded:
        break
    granted += int(sys.argv[4])
print(granted)
"""


def charge_in_processes(kb: dict[str, str], workers: int = 3) -> list[int]:
    start = time.time() + 3  # all begin together, after their imports
    args = [json.dumps(kb), str(start), str(LIMIT), str(STEP)]
    procs = [subprocess.Popen([sys.executable, "-c", CHARGER, *args], stdout=subprocess.PIPE) for _ in range(workers)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * workers
    return [int(o) for o in outs]


@pytest.mark.parametrize("engine", ["postgres", "sqlite"])
def test_a_daily_budget_is_enforced_across_processes(
    engine: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    kb = {"path": str(tmp_path / "kb"), "name": "handbook"}
    if engine == "postgres":
        kb["state_uri"] = request.getfixturevalue("pg_url")
    granted = charge_in_processes(kb)
    total = sum(granted)
    assert total == (LIMIT // STEP) * STEP, granted  # never past the limit, and no grant lost
    assert sum(g > 0 for g in granted) >= 2, granted  # the processes really competed
    settings = CragSettings(kb=kb)
    assert Budget(state_for(settings, BUDGET), per_day_tokens=LIMIT).used_today("tokens") == total
    with pytest.raises(LLMBudgetExceeded, match=f"{total} of {LIMIT} LLM tokens per day already used"):
        Budget(state_for(settings, BUDGET), per_day_tokens=LIMIT).charge_tokens(STEP)


def test_budgets_of_two_knowledge_bases_in_one_database_are_separate(pg_url: str, tmp_path: Path) -> None:
    a = CragSettings(kb={"path": str(tmp_path / "a"), "state_uri": pg_url})
    b = CragSettings(kb={"path": str(tmp_path / "b"), "state_uri": pg_url})
    Budget(state_for(a, BUDGET), per_day_tokens=100).charge_tokens(90)
    Budget(state_for(b, BUDGET), per_day_tokens=100).charge_tokens(90)  # b has its own 100
    with pytest.raises(LLMBudgetExceeded):
        Budget(state_for(a, BUDGET), per_day_tokens=100).charge_tokens(20)
    assert Budget(state_for(b, BUDGET), per_day_tokens=100).used_today("tokens") == 90


# Runs in another process: one search through the shared cache.
SEARCHER = """
import json, sys
from crag.config import CragSettings
from crag.search.cache import CachedSearch
from crag.state import CACHE, state_for
from crag.testing.fakes import StaticWebSearch
from crag.types import WebResult
inner = StaticWebSearch([WebResult("Old Harbour", "https://example.org/harbour", "Built in 1873.")])
cached = CachedSearch(inner, state_for(CragSettings(kb=json.loads(sys.argv[1])), CACHE), ttl_seconds=600)
cached.search("Who built the lighthouse?", k=3)
print(json.dumps(inner.queries))
"""


def test_a_search_cached_by_one_process_is_a_hit_in_another(pg_url: str, tmp_path: Path) -> None:
    kb = {"path": str(tmp_path / "replica1"), "state_uri": pg_url, "name": "handbook"}
    out = subprocess.run([sys.executable, "-c", SEARCHER, json.dumps(kb)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == ["Who built the lighthouse?"]  # a miss there: the provider was called

    kb["path"] = str(tmp_path / "replica2")
    inner = StaticWebSearch([WebResult("other", "https://example.org/other", "not this")])
    cached = CachedSearch(inner, state_for(CragSettings(kb=kb), CACHE), ttl_seconds=600)
    got = cached.search("Who  built the lighthouse?", k=3)
    assert [r.content for r in got] == ["Built in 1873."] and inner.queries == [] and cached.hits == 1
    other = CachedSearch(inner, state_for(CragSettings(kb={**kb, "name": "catalogue"}), CACHE), ttl_seconds=600)
    assert [r.title for r in other.search("Who built the lighthouse?", k=3)] == ["other"]  # not shared across KBs


def test_a_day_may_count_past_two_billion_tokens(pg_url: str, tmp_path: Path) -> None:
    settings = CragSettings(kb={"path": str(tmp_path / "kb"), "state_uri": pg_url})
    Budget(state_for(settings, BUDGET), per_day_tokens=10**12).charge_tokens(3 * 10**9)
    assert Budget(state_for(settings, BUDGET), per_day_tokens=10**12).used_today("tokens") == 3 * 10**9
