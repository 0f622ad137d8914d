"""Concurrent clients for ``benchmarks/replicas.py``: bounded load against several replicas.

Each client thread asks questions (``no_cache``: every request runs the whole pipeline) at the
replicas in turn, as a load balancer without sticky sessions would send them, and rates every
third answer (``POST /v1/feedback``): a rating that got a 2xx is an acknowledged write, checked
afterwards. ``alive`` is the balancer's pool: a replica taken out of it gets no new requests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

CLIENT_TIMEOUT = 30.0  # a request that takes longer counts as a hang


@dataclass
class Call:
    """One request: where it went, when (seconds since the load started) and how it ended."""

    replica: str
    kind: str  # "ask" | "feedback"
    start: float
    end: float
    status: int  # HTTP status; 0: no response (connection refused or reset, timeout)
    error: str = ""
    body: dict[str, Any] = field(default_factory=dict, repr=False)  # the JSON of a 200


@dataclass
class Load:
    """A running load: the pool of replicas (name -> URL), the calls and the acknowledged ratings."""

    alive: dict[str, str]
    questions: list[str]
    calls: list[Call] = field(default_factory=list)
    acked: list[str] = field(default_factory=list)  # trace ids whose rating got a 2xx
    stop: threading.Event = field(default_factory=threading.Event)
    t0: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def pick(self, n: int) -> tuple[str, str]:
        with self.lock:
            names = sorted(self.alive)
            name = names[n % len(names)]
            return name, self.alive[name]

    def call(self, http: httpx.Client, name: str, url: str, kind: str, path: str, body: dict[str, object]) -> Call:
        start = self.now()
        try:
            r = http.post(f"{url}{path}", json=body, timeout=CLIENT_TIMEOUT)
            error = "" if r.status_code < 400 else r.text[:200]
            done = Call(name, kind, start, self.now(), r.status_code, error, r.json() if r.status_code == 200 else {})
        except httpx.HTTPError as exc:
            done = Call(name, kind, start, self.now(), 0, f"{type(exc).__name__}: {exc}"[:200])
        with self.lock:
            self.calls.append(done)
        return done

    def client(self, k: int) -> None:
        n = k
        with httpx.Client() as http:
            while not self.stop.is_set():
                name, url = self.pick(n)
                question = self.questions[n % len(self.questions)]
                asked = self.call(http, name, url, "ask", "/v1/ask", {"question": question, "no_cache": True})
                n += 1
                trace_id = asked.body.get("trace_id")
                if trace_id and n % 3 == 0:
                    name, url = self.pick(n)  # rated through whichever replica comes next
                    rated = self.call(
                        http, name, url, "feedback", "/v1/feedback", {"trace_id": trace_id, "rating": "up"}
                    )
                    if 200 <= rated.status < 300:
                        with self.lock:
                            self.acked.append(str(trace_id))
                if asked.status == 0 or asked.status >= 500:
                    time.sleep(0.05)  # a failing replica: do not spin

    def run(self, clients: int, seconds: float, events: list[tuple[float, Callable[[], None]]] | None = None) -> None:
        """Run ``clients`` threads for ``seconds``; each event ``(t, fn)`` is called at ``t`` seconds."""
        threads = [threading.Thread(target=self.client, args=(k,), daemon=True) for k in range(clients)]
        self.t0 = time.monotonic()
        for t in threads:
            t.start()
        for at, fn in sorted(events or [], key=lambda e: e[0]):
            time.sleep(max(0.0, at - self.now()))
            fn()
        time.sleep(max(0.0, seconds - self.now()))
        self.stop.set()
        for t in threads:
            t.join(timeout=CLIENT_TIMEOUT + 5)  # bounded: every request has a timeout

    def asks(self) -> list[Call]:
        return [c for c in self.calls if c.kind == "ask"]


def missing_ratings(urls: list[str], trace_ids: list[str]) -> list[str]:
    """The acknowledged ratings not found, each read through the replicas in turn."""
    missing = []
    with httpx.Client(timeout=CLIENT_TIMEOUT) as http:
        for i, trace_id in enumerate(trace_ids):
            r = http.get(f"{urls[i % len(urls)]}/v1/feedback/{trace_id}")
            if r.status_code != 200 or r.json().get("rating") != "up":
                missing.append(trace_id)
    return missing
