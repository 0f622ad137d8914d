"""Bring a knowledge base built before metadata filters up to date, once.

Before filters, a chunk's metadata lived only in the manifest (with its JSON types), and the
vector store held ``source``/``title``/``url``. Filters need the metadata in the vector store
too, as strings (:mod:`crag.metadata`). Files that have not changed are never re-read, so
this step rewrites the metadata of the chunks that carry any: in the manifest as strings,
and in the vector store by re-upserting each chunk's own stored vector with it (no
embedding). Then the manifest says so (``metadata_in_store``), and it never runs again.
The knowledge base calls it under its write lock.

>>> backfill_metadata(manifest, vectors, text_in_store=False)   # doctest: +SKIP
"""

from __future__ import annotations

import logging

import numpy as np

from crag.metadata import chunk_fields, normalize_metadata
from crag.protocols import VectorStore
from crag.store.manifest_api import ManifestStore

__all__ = ["METADATA_IN_STORE", "backfill_metadata"]

METADATA_IN_STORE = "metadata_in_store"  # manifest meta key: "1" once the store holds every chunk's metadata
_BATCH = 500
log = logging.getLogger(__name__)


def backfill_metadata(manifest: ManifestStore, vectors: VectorStore, *, text_in_store: bool) -> int:
    """Give ``vectors`` the metadata of every chunk that has some; return how many were rewritten."""
    done, after = 0, ""
    while batch := manifest.metadata_rows(after, _BATCH):
        after = batch[-1].id
        for c in batch:
            c.metadata = normalize_metadata(c.metadata)
        stored = vectors.vectors([c.id for c in batch])
        present = [c for c in batch if c.id in stored]
        if present:
            vectors.upsert(
                [c.id for c in present],
                np.stack([np.asarray(stored[c.id], dtype=np.float32) for c in present]),
                [chunk_fields(c, with_text=text_in_store) for c in present],
            )
        manifest.set_metadata(batch)
        done += len(batch)
    if done:
        log.info("gave the vector store the metadata of %d chunks (metadata filters)", done)
    manifest.set_meta(METADATA_IN_STORE, "1")
    return done
