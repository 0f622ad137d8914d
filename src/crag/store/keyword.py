"""BM25 keyword index (bm25s) over chunk texts, jieba-segmented for Chinese.

The index is derived data: it is rebuilt from the manifest whenever the manifest's
generation changes, and persisted beside the vectors so a restart does not re-tokenise.

>>> idx = BM25Index("/tmp/kb-doc/bm25")                  # doctest: +SKIP
>>> idx.build(["a", "b"], ["北京是中国的首都", "Paris is in France"], generation=1)  # doctest: +SKIP
>>> idx.search("中国的首都", k=1)                           # doctest: +SKIP
[('a', 0.52)]
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from crag.text import tokenize

logging.getLogger("bm25s").setLevel(logging.WARNING)


class BM25Index:
    """A persisted bm25s index tagged with the manifest generation it was built from."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.generation = -1
        self._ids: list[str] = []
        self._model: Any = None

    def load(self) -> None:
        """Load the persisted index if present (silently stays empty when absent or damaged)."""
        meta = self.path / "crag_meta.json"
        if not meta.is_file():
            return
        try:
            import bm25s

            info = json.loads(meta.read_text("utf-8"))
            self._model = bm25s.BM25.load(str(self.path)) if info["ids"] else None
            self._ids = list(info["ids"])
            self.generation = int(info["generation"])
        except Exception:  # derived data: a damaged copy is rebuilt from the manifest
            self.generation, self._ids, self._model = -1, [], None

    def build(self, ids: Sequence[str], texts: Sequence[str], *, generation: int) -> None:
        import bm25s

        self._ids = list(ids)
        self.generation = generation
        self._model = None
        tokens = [tokenize(t) or ["_empty_"] for t in texts]
        if tokens:
            model = bm25s.BM25()
            model.index(_as_tokenized(tokens), show_progress=False)
            self._model = model
        self._save()

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
                json.dumps({"generation": self.generation, "ids": self._ids}), "utf-8"
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

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """Best ``k`` (id, BM25 score) with score > 0."""
        if self._model is None or not self._ids:
            return []
        q = tokenize(query)
        if not q:
            return []
        scores = self._model.get_scores(q)
        order = scores.argsort()[::-1][: min(k, len(self._ids))]
        return [(self._ids[i], float(scores[i])) for i in order if scores[i] > 0]


def _as_tokenized(tokens: list[list[str]]) -> Any:
    """bm25s wants (ids, vocab); build them from our own tokens (jieba for Chinese)."""
    import bm25s

    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(t, len(vocab)) for t in doc] for doc in tokens]
    return bm25s.tokenization.Tokenized(ids=ids, vocab=vocab)
