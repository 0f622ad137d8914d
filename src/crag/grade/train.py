"""Train the ``trained`` evaluator's small numpy model from labelled (query, passage) pairs.

The pairs file is JSONL with ``query``, ``passage``, ``label`` (0/1) and ``lang``;
``scripts/build_eval_pairs.py`` makes one from CMRC 2018 and SQuAD 2.0. Embedding is the
slow part, so vectors are cached on disk by text hash; a re-run only trains.

>>> from crag.grade.train import train_model
>>> metrics = train_model("data/eval_pairs/train.jsonl", embedder, "model.npz")  # doctest: +SKIP
>>> metrics["val"]["auroc"] > 0.9                                                 # doctest: +SKIP
True
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from crag.errors import InputError
from crag.grade.metrics import accuracy_at, auroc, best_threshold
from crag.grade.mlp import fit
from crag.grade.trained import FEATURE_VERSION, Model, pair_features
from crag.protocols import Embedder, EmbedKind

__all__ = [
    "DEFAULT_CACHE",
    "builtin_pairs_path",
    "embed_cached",
    "featurize",
    "fit",
    "load_pairs",
    "mix_pairs",
    "sample_rows",
    "train_model",
    "train_rows",
]

DEFAULT_CACHE = Path(".cache/crag/eval-embeddings")
COLD_L2 = 3e-2  # chosen by validation loss for the bundled model (EVALUATOR.md)
WARM_L2 = 1.0  # pull towards the start model on a warm start (L2-SP)


def _key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def embed_cached(
    embedder: Embedder,
    texts: Sequence[str],
    *,
    kind: EmbedKind,
    cache_dir: Path = DEFAULT_CACHE,
    batch: int = 16,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Vectors for ``texts``; unseen texts are embedded in batches and saved as they go."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    safe = embedder.model_id.replace("/", "_")
    path = cache_dir / f"{safe}-{kind}.npz"
    store: dict[str, np.ndarray] = {}
    if path.exists():
        with np.load(path) as z:
            store = dict(zip(z["keys"].tolist(), z["vecs"], strict=True))
    keys = [_key(t) for t in texts]
    todo = list(dict.fromkeys(k for k in keys if k not in store))
    by_key = dict(zip(keys, texts, strict=True))
    for i in range(0, len(todo), batch):
        chunk = todo[i : i + batch]
        vecs = embedder.embed([by_key[k] for k in chunk], kind=kind)
        store.update(zip(chunk, np.asarray(vecs, dtype=np.float32), strict=True))
        np.savez(path, keys=np.array(list(store)), vecs=np.stack(list(store.values())))
        if progress:
            progress(min(i + batch, len(todo)), len(todo))
    if not keys:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack([store[k] for k in keys]).astype(np.float32)


def load_pairs(path: str | Path) -> list[dict[str, Any]]:
    """Read a pairs JSONL file; a line without query/passage/label is an ``InputError``."""
    rows = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            r["label"] = int(r["label"])
            str(r["query"]), str(r["passage"])
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(f"{path}:{n}: not a pair with query, passage, label ({exc})") from None
        rows.append(r)
    if not rows:
        raise InputError(f"{path}: no pairs; build them with scripts/build_eval_pairs.py")
    return rows


def featurize(
    rows: Sequence[dict[str, Any]],
    embedder: Embedder,
    *,
    cache_dir: Path = DEFAULT_CACHE,
    progress: Callable[[str, int, int], None] | None = None,
) -> np.ndarray:
    """Feature matrix for pairs (query/passage vectors from the cache or the embedder)."""
    qs = [r["query"] for r in rows]
    ps = [r["passage"] for r in rows]
    qv = embed_cached(
        embedder,
        qs,
        kind="query",
        cache_dir=cache_dir,
        progress=(lambda i, n: progress("query", i, n)) if progress else None,
    )
    pv = embed_cached(
        embedder,
        ps,
        kind="passage",
        cache_dir=cache_dir,
        progress=(lambda i, n: progress("passage", i, n)) if progress else None,
    )
    return np.stack([pair_features(q, p, a, b) for q, p, a, b in zip(qs, ps, qv, pv, strict=True)])


def _split(rows: Sequence[dict[str, Any]], share: float, seed: int) -> np.ndarray:
    """Validation mask grouped by article title (else query), drawn per language.

    Per language, so a language with few articles (SQuAD's half dev set has 16) still
    gets validation data; by group, so no article is on both sides. The language is the
    passage's (``passage_lang``, else ``lang``): a company asked about in both languages is
    one group, not one per question language.
    """
    rng = np.random.default_rng(seed)

    def lang_of(r: dict[str, Any]) -> str:
        return str(r.get("passage_lang") or r.get("lang", ""))

    def group(r: dict[str, Any]) -> str:
        return f"{lang_of(r)}|{r.get('title') or r['query']}"

    val: set[str] = set()
    for lang in sorted({lang_of(r) for r in rows}):
        groups = sorted({group(r) for r in rows if lang_of(r) == lang})
        take = max(1, round(len(groups) * share)) if len(groups) > 1 else 0
        val |= set(rng.permutation(groups)[:take].tolist())
    return np.array([group(r) in val for r in rows])


def builtin_pairs_path() -> Path:
    """The built-in training pairs (CMRC 2018 + SQuAD 2.0) of a source checkout.

    They ship with the repository (``data/eval_pairs/train.jsonl``), not in the wheel.
    """
    path = Path(__file__).resolve().parents[3] / "data" / "eval_pairs" / "train.jsonl"
    if not path.is_file():
        raise InputError(
            f"built-in training pairs not found at {path}: they ship with the crag source checkout "
            "(data/eval_pairs/train.jsonl); pass that file with --builtin-pairs PATH"
        )
    return path


def sample_rows(rows: Sequence[dict[str, Any]], limit: int | None, seed: int = 0) -> list[dict[str, Any]]:
    """``limit`` rows drawn without replacement (all when ``limit`` is None or covers them)."""
    if limit is None or limit >= len(rows):
        return list(rows)
    pick = np.random.default_rng(seed).choice(len(rows), size=limit, replace=False)
    return [rows[i] for i in sorted(pick.tolist())]


def mix_pairs(
    own: Sequence[dict[str, Any]],
    builtin: Sequence[dict[str, Any]],
    *,
    own_share: float = 0.25,
) -> list[dict[str, Any]]:
    """Your pairs and built-in ones in one training set; yours marked ``own`` and weighted.

    Your pairs (feedback, LLM labels) are few next to the built-in ones, so each gets a
    ``weight`` that makes them ``own_share`` of the total weight (never less than 1 each).

    >>> rows = mix_pairs([{"query": "q", "passage": "p", "label": 0}], [{"query": "a", "passage": "b", "label": 1}] * 9)
    >>> rows[0]["own"], rows[0]["weight"], rows[1]["weight"]
    (True, 3.0, 1.0)
    """
    if not 0 < own_share < 1:
        raise InputError(f"own_share must be between 0 and 1, got {own_share}")
    w = max(1.0, own_share / (1 - own_share) * len(builtin) / max(1, len(own)))
    return [{**r, "own": True, "weight": round(w, 4)} for r in own] + [
        {**r, "own": False, "weight": 1.0} for r in builtin
    ]


def train_model(
    pairs_jsonl: str | Path,
    embedder: Embedder,
    out_path: str | Path,
    **kwargs: Any,
) -> dict[str, Any]:
    """Train on ``pairs_jsonl`` (see :func:`train_rows`), save the model to ``out_path``."""
    return train_rows(load_pairs(pairs_jsonl), embedder, out_path, **kwargs)


def train_rows(
    rows: Sequence[dict[str, Any]],
    embedder: Embedder,
    out_path: str | Path,
    *,
    hidden: int = 32,
    l2: float | None = None,
    val_share: float = 0.15,
    seed: int = 0,
    cache_dir: Path | None = None,
    init: Model | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Train on labelled pair dicts, save the model to ``out_path`` and return validation metrics.

    The decision threshold is the accuracy-maximising one on the validation split (a
    group of article titles held out from fitting); it is stored in the model file.

    Rows may carry a ``weight`` and an ``own`` flag (:func:`mix_pairs`): own rows are few and
    precious, so they always train and also join the validation loss that stops training —
    a warm start (``init``, e.g. the bundled model) then learns them without forgetting the
    built-in data, which alone forms the held-out validation metrics.

    ``l2`` defaults to 3e-2 from scratch and to 1.0 on a warm start, where it pulls towards
    the start model's weights: on the sample feedback loop a weaker pull (0.03, 0.3) fitted
    the feedback pairs closer but lost up to 0.007 / 0.004 AUROC on held-out built-in pairs,
    1.0 at most 0.002 (benchmarks/README.md, "Settings chosen by measurement").
    """
    if l2 is None:
        l2 = WARM_L2 if init is not None else COLD_L2
    t0 = time.perf_counter()
    pairs = _Pairs.build(rows, embedder, cache_dir, progress, val_share=val_share, seed=seed)
    model, info = pairs.fit(hidden=hidden, l2=l2, seed=seed, init=init)
    metrics: dict[str, Any] = {
        **pairs.counts(),
        "warm_start": init is not None,
        "l2": l2,
        "threshold": model.threshold,
        "feature_version": FEATURE_VERSION,
        "embedder": embedder.model_id,
        **info,
        **_held_out_metrics(model, pairs.X, pairs.y, pairs.rows, pairs.val, pairs.own),
    }
    model.save(out_path, meta={k: v for k, v in metrics.items() if not isinstance(v, dict)})
    metrics["seconds"] = round(time.perf_counter() - t0, 1)
    return metrics


@dataclass
class _Pairs:
    """The training pairs as arrays, with which rows are held out and which stop training.

    ``val``: the held-out rows (never own ones when both kinds are mixed); ``stop``: the rows
    whose loss stops training (the held-out ones, plus the own ones when mixed).
    """

    rows: list[dict[str, Any]]
    X: np.ndarray
    y: np.ndarray
    weight: np.ndarray
    own: np.ndarray
    val: np.ndarray
    stop: np.ndarray

    @classmethod
    def build(
        cls,
        rows: Sequence[dict[str, Any]],
        embedder: Embedder,
        cache_dir: Path | None,
        progress: Callable[[str, int, int], None] | None,
        *,
        val_share: float,
        seed: int,
    ) -> _Pairs:
        """Featurise ``rows`` (an ``InputError`` when there are none) and split them."""
        rows = list(rows)
        if not rows:
            raise InputError("no training pairs")
        cache = cache_dir if cache_dir is not None else _cache_dir()
        X, y, weight, own = _arrays(rows, embedder, cache, progress)
        val, stop = _validation_rows(rows, own, val_share, seed)
        return cls(rows, X, y, weight, own, val, stop)

    def fit(self, *, hidden: int, l2: float, seed: int, init: Model | None) -> tuple[Model, dict[str, float]]:
        """Fit on the rows not held out, stop on ``stop``'s loss; the threshold is chosen on ``val``."""
        fit_on, val, stop, weight = ~self.val, self.val, self.stop, self.weight
        model, info = fit(
            self.X[fit_on], self.y[fit_on], self.X[stop], self.y[stop],
            hidden=hidden, l2=l2, seed=seed, weights=weight[fit_on], val_weights=weight[stop], init=init,
        )  # fmt: skip
        model.threshold = best_threshold(self.y[val], model.predict(self.X[val]))
        return model, info

    def counts(self) -> dict[str, Any]:
        """How many rows trained, were held out and are own, and the own rows' weight."""
        own = self.own
        return {
            "n_train": int((~self.val).sum()),
            "n_val": int(self.val.sum()),
            "n_own": int(own.sum()),
            "own_weight": float(self.weight[own].max()) if own.any() else None,
        }


def _arrays(
    rows: Sequence[dict[str, Any]], embedder: Embedder, cache: Path, progress: Callable[[str, int, int], None] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The rows as arrays: features, labels, weights, and which rows are the user's own."""
    X = featurize(rows, embedder, cache_dir=cache, progress=progress)
    y = np.array([r["label"] for r in rows], dtype=np.float32)
    weight = np.array([float(r.get("weight", 1.0)) for r in rows], dtype=np.float32)
    own = np.array([bool(r.get("own")) for r in rows])
    return X, y, weight, own


def _validation_rows(
    rows: Sequence[dict[str, Any]], own: np.ndarray, val_share: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """The held-out rows (never own ones when both kinds are mixed), and the rows whose loss
    stops training (the held-out ones, plus the own ones when mixed)."""
    mixed = own.any() and not own.all()
    val = _split(rows, val_share, seed) & ~own if mixed else _split(rows, val_share, seed)
    stop = val | own if mixed else val
    return val, stop


def _held_out_metrics(
    model: Model, X: np.ndarray, y: np.ndarray, rows: Sequence[dict[str, Any]], val: np.ndarray, own: np.ndarray
) -> dict[str, Any]:
    """AUROC and accuracy on the held-out rows (overall and per language), and how close the
    model comes to the own rows' labels."""
    sv = model.predict(X[val])
    out: dict[str, Any] = {"val": {"auroc": auroc(y[val], sv), "accuracy": accuracy_at(y[val], sv, model.threshold)}}
    if own.any():
        so = model.predict(X[own])
        out["own"] = {"auroc": auroc(y[own], so), "mean_abs_error": float(np.mean(np.abs(y[own] - so)))}
    langs = np.array([r.get("lang", "") for r in rows])
    for lang in sorted(set(langs[val].tolist())):
        sel = langs[val] == lang
        out[f"val_{lang}"] = {
            "auroc": auroc(y[val][sel], sv[sel]),
            "accuracy": accuracy_at(y[val][sel], sv[sel], model.threshold),
        }
    return out


def _cache_dir() -> Path:
    from crag.paths import cache_dir

    return cache_dir() / "eval-embeddings"
