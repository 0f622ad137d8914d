"""BM25 keyword index (bm25s) over chunk texts, jieba-segmented for Chinese.

The index is derived data: it is rebuilt from the manifest whenever the manifest's
generation changes, and persisted beside the vectors so a restart does not re-tokenise.
Each chunk's tokens are also kept in ``<name>_tokens.sqlite`` (``TokenCache``), so a rebuild
after an ingest tokenises only the new chunks: jieba is most of the build time, about seven
minutes for a million chunks on two cores.

>>> import tempfile, pathlib
>>> idx = BM25Index(pathlib.Path(tempfile.mkdtemp()) / "bm25")
>>> texts = {"a": "北京是中国的首都", "b": "Paris is in France"}
>>> idx.rebuild(list(texts), lambda ids: {i: texts[i] for i in ids}, generation=1)
>>> [hit_id for hit_id, _ in idx.search("中国的首都", k=1)]
['a']
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from crag.paths import is_disk_full
from crag.redact import clip
from crag.text import tokenize

logging.getLogger("bm25s").setLevel(logging.WARNING)
log = logging.getLogger(__name__)
# Bump when crag.text.tokenize changes: cached tokens and a persisted index are then redone.
# 2: full-width letters and digits are tokenised as ASCII.
TOKENIZER_VERSION = "2"


class BM25Index:
    """A persisted bm25s index tagged with the manifest generation it was built from."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.generation = -1
        self._ids: list[str] = []
        self._model: Any = None
        self._masks: dict[frozenset[str], np.ndarray] = {}  # filter results as row masks (see search)
        self.load_error = ""  # why the persisted copy was unusable (it is rebuilt), "" when fine

    def load(self) -> None:
        """Load the persisted index if present; stays empty when absent, and when damaged says why.

        A damaged copy (half-written files, an incompatible bm25s version) is logged and its
        reason kept in ``load_error``; the knowledge base then rebuilds it from the manifest.
        """
        meta = self.path / "crag_meta.json"
        if not meta.is_file():
            return
        try:
            import bm25s

            info = json.loads(meta.read_text("utf-8"))
            if str(info.get("tokenizer", "1")) != TOKENIZER_VERSION:
                log.info("keyword index %s was built by an older tokenizer; rebuilding it", self.path)
                return
            self._model = bm25s.BM25.load(str(self.path)) if info["ids"] else None
            self._ids = list(info["ids"])
            self._masks = {}
            self.generation = int(info["generation"])
        except Exception as exc:  # bm25s and numpy raise many types; the reason is logged and kept
            self.load_error = f"{type(exc).__name__}: {clip(' '.join(str(exc).split()), 200)}"
            log.warning("keyword index %s is damaged (%s); rebuilding it from the manifest", self.path, self.load_error)
            self.generation, self._ids, self._model = -1, [], None

    def rebuild(
        self, ids: Sequence[str], texts_for: Callable[[Sequence[str]], dict[str, str]], *, generation: int
    ) -> None:
        """Build over ``ids``, tokenising only the chunks the token cache has not seen.

        ``texts_for(ids)`` returns the texts of the given chunk ids (the manifest's). On a full
        disk the index is built in memory and serves this process (it is saved by the next
        rebuild that has room): questions keep being answered while writes fail.
        """
        try:
            self._rebuild_cached(ids, texts_for, generation=generation)
        except (sqlite3.Error, OSError) as exc:
            if not is_disk_full(self.path.parent, exc):
                raise
            log.warning("keyword index %s: disk full (%s); built in memory, not saved", self.path, exc)
            self._rebuild_in_memory(ids, texts_for, generation=generation)
            return
        try:
            self._save()
        except OSError as exc:
            if not is_disk_full(self.path.parent, exc):
                raise
            log.warning("keyword index %s: disk full (%s); kept in memory, not saved", self.path, exc)

    def _rebuild_in_memory(
        self, ids: Sequence[str], texts_for: Callable[[Sequence[str]], dict[str, str]], *, generation: int
    ) -> None:
        from crag.store.bm25_build import build_bm25

        texts = texts_for(ids)
        tokens = [tokenize(texts.get(i, "")) or ["_empty_"] for i in ids]
        self._ids, self.generation = list(ids), generation
        self._model = build_bm25(lambda: iter(tokens)) if tokens else None

    def _rebuild_cached(
        self, ids: Sequence[str], texts_for: Callable[[Sequence[str]], dict[str, str]], *, generation: int
    ) -> None:
        cache = TokenCache(self.path.parent / f"{self.path.name}_tokens.sqlite")
        try:
            cached = cache.ids()
            missing = [i for i in ids if i not in cached]
            # Tokenise in slices straight into the cache: a 100 MB file's chunks held as token
            # strings all at once took 2.5 GB; a slice holds a few MB.
            for start in range(0, len(missing), _TOKENIZE_SLICE):
                part = missing[start : start + _TOKENIZE_SLICE]
                texts = texts_for(part)
                cache.put_many({i: tokenize(texts.get(i, "")) or ["_empty_"] for i in part})
            if len(cached) + len(missing) > len(ids):
                cache.retain(set(ids))
            self._ids = list(ids)
            self._masks = {}
            self.generation = generation
            self._model = None
            if self._ids:
                from crag.store.bm25_build import build_bm25

                ids = self._ids
                self._model = build_bm25(lambda: cache.tokens(ids))
        finally:
            cache.close()

    def _save(self) -> None:
        # Build in a private temp folder and swap it in, so a crash never leaves a half-written
        # index and two processes (server workers) saving at once cannot trample each other.
        parent = self.path.parent
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"{self.path.name}.tmp-", dir=parent))
        old = Path(tempfile.mkdtemp(prefix=f"{self.path.name}.old-", dir=parent))
        try:
            if self._model is not None:
                self._model.save(str(tmp))
            (tmp / "crag_meta.json").write_text(
                json.dumps({"generation": self.generation, "ids": self._ids, "tokenizer": TOKENIZER_VERSION}), "utf-8"
            )
            old.rmdir()  # only its unique name is needed
            try:
                os.replace(self.path, old)
            except FileNotFoundError:
                pass
            try:
                os.replace(tmp, self.path)
            except OSError:
                pass  # another process installed an index meanwhile; ours stays in memory
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(old, ignore_errors=True)

    def search(self, query: str, k: int, *, only: frozenset[str] | None = None) -> list[tuple[str, float]]:
        """Best ``k`` (id, BM25 score) with score > 0; with ``only``, among those ids alone.

        ``only`` (the chunks a metadata filter admits) is applied to the scores before the
        top ``k`` is taken, so the ``k`` are all admitted ones. Its row mask is kept for
        the next search with the same set object.
        """
        if self._model is None or not self._ids:
            return []
        q = tokenize(query)
        if not q:
            return []
        scores = self._model.get_scores(q)
        if only is not None:
            scores = np.where(self._mask(only), scores, 0.0)
        k = min(k, len(self._ids))
        # argpartition, then sort only the k best: a full argsort costs ~100 ms at 10^6 chunks.
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        order = top[np.argsort(-scores[top], kind="stable")]
        return [(self._ids[i], float(scores[i])) for i in order if scores[i] > 0]

    def _mask(self, only: frozenset[str]) -> np.ndarray:
        mask = self._masks.get(only)
        if mask is None:
            # Chunk ids are ASCII hex: as bytes, numpy compares them without Python objects.
            mask = np.isin(np.array(self._ids, dtype="S"), np.array(sorted(only), dtype="S"))
            if len(self._masks) >= _MASKS:
                self._masks.clear()  # atomic, unlike evicting one (other threads may be searching)
            self._masks[only] = mask
        return mask


_MASKS = 16  # filter masks kept per index (one bool per chunk each)
_SEP = "\x1f"  # unit separator: never inside a token
_TOKENIZE_SLICE = 2000  # chunks tokenised and cached at a time during a rebuild


class TokenCache:
    r"""Chunk id -> BM25 tokens in SQLite; derived data, safe to delete.

    >>> import tempfile, pathlib
    >>> c = TokenCache(pathlib.Path(tempfile.mkdtemp()) / "t.sqlite")
    >>> c.put_many({"a": ["北京", "capital"]})
    >>> c.get_all()
    {'a': '北京\x1fcapital'}
    >>> c.close()
    """

    def __init__(self, path: Path) -> None:
        from crag._sqlite import set_wal

        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), timeout=30)
        set_wal(self._db)
        with self._db:
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            self._db.execute("CREATE TABLE IF NOT EXISTS tokens (id TEXT PRIMARY KEY, tokens TEXT NOT NULL)")
            row = self._db.execute("SELECT value FROM meta WHERE key='tokenizer'").fetchone()
            if row is None or row[0] != TOKENIZER_VERSION:
                self._db.execute("DELETE FROM tokens")
                self._db.execute("INSERT OR REPLACE INTO meta VALUES ('tokenizer', ?)", (TOKENIZER_VERSION,))

    def get_all(self) -> dict[str, str]:
        return dict(self._db.execute("SELECT id, tokens FROM tokens"))

    def ids(self) -> set[str]:
        return {r[0] for r in self._db.execute("SELECT id FROM tokens")}

    def tokens(self, ids: Sequence[str]) -> Iterator[list[str]]:
        """The tokens of each of ``ids``, in order, read a slice at a time (unknown ids: none)."""
        for start in range(0, len(ids), 500):
            part = list(ids[start : start + 500])
            marks = ",".join("?" * len(part))
            found = dict(self._db.execute(f"SELECT id, tokens FROM tokens WHERE id IN ({marks})", part))
            for i in part:
                yield found[i].split(_SEP) if i in found else []

    def put_many(self, items: dict[str, list[str]]) -> None:
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO tokens VALUES (?, ?)", [(i, _SEP.join(t)) for i, t in items.items()]
            )

    def retain(self, ids: set[str]) -> None:
        """Forget chunks no longer in the knowledge base."""
        gone = [(i,) for (i,) in self._db.execute("SELECT id FROM tokens") if i not in ids]
        with self._db:
            self._db.executemany("DELETE FROM tokens WHERE id=?", gone)

    def close(self) -> None:
        self._db.close()
