"""``kill -9`` a parallel ingest or a multi-worker server and count what it leaves behind (tests, benchmarks).

:func:`serve_kill_cycles` does the same to ``crag serve --workers N``: start it on one port,
wait until every uvicorn worker is up, SIGKILL the ``crag serve`` process alone, count the
processes it started that survive ``grace`` seconds, and start the next cycle on the same
port (a restart that fails with "Address already in use" is counted).

Each cycle starts ``crag ingest CORPUS --kb KB --workers 2`` in a fresh knowledge base, waits
until the embedding workers are up, sleeps a seeded random moment, SIGKILLs the CLI process
and then watches every process it had started (workers, multiprocessing's resource tracker)
for ``grace`` seconds. Survivors are orphans; they are killed before the next cycle. The
killed knowledge base is then opened and checked: the manifest and the vector store agree.

Needs ``psutil`` (``dev`` extra) and POSIX signals.

### Usage example
>>> result = kill_cycles(corpus, tmp_path, cycles=3)          # doctest: +SKIP
>>> result.orphans, result.inconsistent                        # doctest: +SKIP
(0, 0)
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["KillResult", "check_kb", "kill_cycles", "serve_kill_cycles"]


@dataclass
class KillResult:
    cycles: int = 0
    killed_mid_run: int = 0
    orphans: int = 0
    inconsistent: int = 0
    descendants_seen: int = 0
    seconds_to_clean: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    restart_failures: int = 0


def check_kb(kb: Path, embedder: Any) -> str:
    """``""`` when the knowledge base at ``kb`` is consistent, else what is wrong (one line)."""
    from crag.kb import KnowledgeBase

    if not (kb / "manifest.sqlite").is_file():
        return ""  # killed before the first commit: nothing was created, nothing to be wrong
    base = KnowledgeBase(kb, embedder)  # opening reconciles: orphan vectors are deleted
    manifest_ids = base.manifest.chunk_ids()
    vector_ids = base.vectors.all_ids()
    if manifest_ids != vector_ids:
        return f"{kb}: {len(manifest_ids - vector_ids)} chunks without vectors, {len(vector_ids - manifest_ids)} extra"
    for path in base.manifest.files():
        if not base.manifest.chunk_ids(path):
            return f"{kb}: file {path} committed with no chunks"
    return ""


def kill_cycles(
    corpus: Path,
    workdir: Path,
    *,
    cycles: int = 10,
    workers: int = 2,
    max_delay: float = 2.0,
    grace: float = 10.0,
    seed: int = 12,
    embedder: Any = None,
) -> KillResult:
    """Run ``cycles`` kill -9 cycles of ``crag ingest --workers`` over ``corpus``."""
    import psutil

    rng = random.Random(seed)
    result = KillResult()
    env = {**os.environ, "COLUMNS": "120"}
    for n in range(cycles):
        kb = workdir / f"kb-{n}"
        cmd = [sys.executable, "-m", "crag.cli", "ingest", str(corpus), "--kb", str(kb), "--workers", str(workers)]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        parent = psutil.Process(proc.pid)
        # Workers are up once `workers` spawned children run (the resource tracker is one more).
        seen = _wait_for_workers(parent, workers, running=proc)
        time.sleep(rng.uniform(0.2, max_delay))
        _note_children(parent, seen)
        result.cycles += 1
        if proc.poll() is None:
            result.killed_mid_run += 1
        _kill_and_count(proc, seen, grace, result, n)
        if embedder is not None:
            _count_inconsistent(kb, embedder, result)
    return result


def _note_children(parent: Any, seen: dict[int, Any]) -> None:
    """Add the processes ``parent`` runs now to ``seen`` (nothing when it is gone)."""
    import psutil

    try:
        for child in parent.children(recursive=True):
            seen.setdefault(child.pid, child)
    except psutil.NoSuchProcess:
        pass


def _count_inconsistent(kb: Path, embedder: Any, result: KillResult) -> None:
    """Open the killed knowledge base and count it (with what is wrong) when it is inconsistent."""
    problem = check_kb(kb, embedder)
    if problem:
        result.inconsistent += 1
        result.notes.append(problem)


def _is_worker(p: Any) -> bool:
    try:
        cmd = " ".join(p.cmdline())
    except Exception:  # the process went away between listing and reading
        return False
    return "spawn_main" in cmd and "resource_tracker" not in cmd


def _describe(p: Any) -> str:
    try:
        return f"{p.pid} {' '.join(p.cmdline())[:80]}"
    except Exception:
        return str(p.pid)


def serve_kill_cycles(
    kb: Path,
    *,
    cycles: int = 10,
    workers: int = 2,
    env: dict[str, str] | None = None,
    grace: float = 10.0,
    log: Path | None = None,
) -> KillResult:
    """Run ``cycles`` kill -9 cycles of ``crag serve --kb KB --workers N`` on one loopback port."""
    import psutil

    from crag.testing.net import free_port
    from crag.testing.processes import wait_ready

    port = free_port()
    result = KillResult()
    full_env = {**os.environ, **(env or {})}
    out = log.open("a") if log else subprocess.DEVNULL
    try:
        for n in range(cycles):
            cmd = [sys.executable, "-m", "crag.cli", "serve", "--kb", str(kb), "--port", str(port)]
            proc = subprocess.Popen(
                [*cmd, "--workers", str(workers)], env=full_env, stdout=out, stderr=subprocess.STDOUT if log else out
            )
            try:
                wait_ready(proc, f"http://127.0.0.1:{port}/healthz", 120, "crag serve")
            except RuntimeError as exc:
                result.restart_failures += 1
                result.notes.append(f"cycle {n}: {exc}")
                proc.kill()
                proc.wait()
                continue
            seen = _wait_for_workers(psutil.Process(proc.pid), workers)
            result.cycles += 1
            _kill_and_count(proc, seen, grace, result, n)
    finally:
        if not isinstance(out, int):
            out.close()
    return result


def _wait_for_workers(
    parent: Any, workers: int, timeout: float = 120.0, *, running: subprocess.Popen[Any] | None = None
) -> dict[int, Any]:
    """Every process ``parent`` started, once ``workers`` spawned workers are among them
    (or once ``running`` has ended: an ingest may finish before its workers are counted)."""
    import psutil

    seen: dict[int, Any] = {}
    deadline = time.monotonic() + timeout
    while (running is None or running.poll() is None) and time.monotonic() < deadline:
        try:
            for child in parent.children(recursive=True):
                seen.setdefault(child.pid, child)
        except psutil.NoSuchProcess:
            break
        if sum(_is_worker(p) for p in seen.values()) >= workers:
            break
        time.sleep(0.05)
    return seen


def _kill_and_count(
    proc: subprocess.Popen[Any], seen: dict[int, Any], grace: float, result: KillResult, n: int
) -> None:
    """``kill -9`` the parent, then count which of its descendants outlive it by ``grace`` seconds."""
    import psutil

    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = time.monotonic()
    result.descendants_seen += len(seen)
    _, alive = psutil.wait_procs(list(seen.values()), timeout=grace)
    result.seconds_to_clean.append(round(time.monotonic() - killed_at, 2))
    if alive:
        result.orphans += len(alive)
        result.notes.append(f"cycle {n}: {len(alive)} survivors: {[_describe(p) for p in alive]}")
        for p in alive:  # clean up before the next cycle
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
