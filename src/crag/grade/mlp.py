"""The ``trained`` evaluator's small numpy model: a one-hidden-layer MLP fitted with Adam.

:func:`fit` takes standardisable feature matrices (training and validation) and returns a
:class:`~crag.grade.trained.Model` plus how training went. ``crag.grade.train`` builds the
features from labelled pairs and calls it; inference lives with the model in
``crag.grade.trained``.

>>> import numpy as np
>>> from crag.grade.mlp import fit
>>> X = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
>>> y = (X[:, 0] > 0).astype(np.float32)
>>> model, info = fit(X, y, X, y, hidden=0, epochs=5)
>>> sorted(info)
['epochs', 'val_loss']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from crag.grade.trained import Model


def _start_params(init: Model | None, hidden: int, d: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The weights training starts from: the ``init`` model's, or random (He) ones, or zeros."""
    if init is not None:
        params = {"W2": init.W2.astype(np.float32), "b2": np.asarray(init.b2, np.float32)}
        if init.W1 is not None and init.b1 is not None:
            params |= {"W1": init.W1.astype(np.float32), "b1": init.b1.astype(np.float32)}
        return params
    if hidden:
        return {
            "W1": rng.normal(0, np.sqrt(2 / d), (d, hidden)).astype(np.float32),
            "b1": np.zeros(hidden, np.float32),
            "W2": rng.normal(0, np.sqrt(1 / hidden), (hidden,)).astype(np.float32),
            "b2": np.zeros((), np.float32),
        }
    return {"W2": np.zeros(d, np.float32), "b2": np.zeros((), np.float32)}


def _gradients(
    params: dict[str, np.ndarray],
    anchor: dict[str, np.ndarray],
    A0: np.ndarray,
    yb: np.ndarray,
    wb: np.ndarray,
    *,
    l2: float,
    dropout: float,
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """The weighted log-loss gradients of one batch, with L2 towards ``anchor`` (and dropout)."""
    if "W1" in params:
        H = np.maximum(A0 @ params["W1"] + params["b1"], 0)
        if dropout:
            H = H * (rng.random(H.shape) > dropout) / (1 - dropout)
    else:
        H = A0
    s = H @ params["W2"] + params["b2"]
    g = wb * (1 / (1 + np.exp(-np.clip(s, -30, 30))) - yb) / len(A0)
    grads = {"W2": H.T @ g + l2 * (params["W2"] - anchor["W2"]), "b2": np.asarray(g.sum(), np.float32)}
    if "W1" in params:
        gH = np.outer(g, params["W2"]) * (H > 0)
        grads["W1"] = A0.T @ gH + l2 * (params["W1"] - anchor["W1"])
        grads["b1"] = gH.sum(0)
    return grads


def _adam_step(
    params: dict[str, np.ndarray],
    grads: dict[str, np.ndarray],
    m: dict[str, np.ndarray],
    v2: dict[str, np.ndarray],
    t: int,
    lr: float,
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
) -> None:
    """One Adam update of ``params`` in place (``m``, ``v2``: the moment estimates)."""
    for k in params:
        m[k] = b1 * m[k] + (1 - b1) * grads[k]
        v2[k] = b2 * v2[k] + (1 - b2) * grads[k] ** 2
        mh = m[k] / (1 - b1**t)
        vh = v2[k] / (1 - b2**t)
        params[k] = (params[k] - lr * mh / (np.sqrt(vh) + eps)).astype(np.float32)


@dataclass
class _Adam:
    """The parameters being trained, Adam's moment estimates, and the L2 anchor.

    L2 pulls towards the start: zero from scratch, the start model's weights on a warm
    start (L2-SP), so learning a few corrections does not decay what the model knew.
    """

    params: dict[str, np.ndarray]
    anchor: dict[str, np.ndarray]
    m: dict[str, np.ndarray]
    v2: dict[str, np.ndarray]
    t: int = 0

    @classmethod
    def start(cls, params: dict[str, np.ndarray], *, warm: bool) -> _Adam:
        anchor = {k: (v.copy() if warm else np.zeros_like(v)) for k, v in params.items()}
        m = {k: np.zeros_like(v) for k, v in params.items()}
        v2 = {k: np.zeros_like(v) for k, v in params.items()}
        return cls(params, anchor, m, v2)

    def step(
        self,
        A0: np.ndarray,
        yb: np.ndarray,
        wb: np.ndarray,
        *,
        l2: float,
        dropout: float,
        lr: float,
        rng: np.random.Generator,
    ) -> None:
        """One batch: its gradients, then one Adam update of the parameters in place."""
        grads = _gradients(self.params, self.anchor, A0, yb, wb, l2=l2, dropout=dropout, rng=rng)
        self.t += 1
        _adam_step(self.params, grads, self.m, self.v2, self.t, lr)


@dataclass
class _EarlyStop:
    """The best validation loss so far, the parameters that had it, and epochs since it improved."""

    best: float
    best_params: dict[str, np.ndarray]
    bad: int = 0

    @classmethod
    def start(
        cls, val_loss: Callable[[dict[str, np.ndarray]], float], params: dict[str, np.ndarray], *, warm: bool
    ) -> _EarlyStop:
        """Where early stopping starts: a warm start must beat where it started, or it is kept."""
        if warm:
            return cls(val_loss(params), {k: v.copy() for k, v in params.items()})
        return cls(np.inf, params)

    def should_stop(self, loss: float, params: dict[str, np.ndarray], patience: int) -> bool:
        """Keep ``params`` when ``loss`` improves on the best; True after ``patience`` epochs without."""
        if loss < self.best - 1e-4:
            self.best, self.best_params, self.bad = loss, {k: v.copy() for k, v in params.items()}, 0
            return False
        self.bad += 1
        return self.bad >= patience


def _forward(P: dict[str, np.ndarray], A: np.ndarray) -> np.ndarray:
    """The model's scores (logits) of the standardised features ``A``."""
    if "W1" in P:
        A = np.maximum(A @ P["W1"] + P["b1"], 0)
    return np.asarray(A @ P["W2"] + P["b2"])


def _standardisation(X: np.ndarray, init: Model | None) -> tuple[np.ndarray, np.ndarray]:
    """The features' mean and scale: the start model's on a warm start, else the data's."""
    if init is not None:
        return init.mean.astype(np.float32), init.scale.astype(np.float32)
    return X.mean(0), X.std(0) + 1e-6


@dataclass
class _Data:
    """The rows fitted on and the validation rows, standardised, with each row's loss weight."""

    mean: np.ndarray
    scale: np.ndarray
    Z: np.ndarray
    y: np.ndarray
    w: np.ndarray
    Zv: np.ndarray
    yv: np.ndarray
    wv: np.ndarray

    @classmethod
    def of(
        cls,
        X: np.ndarray,
        y: np.ndarray,
        Xv: np.ndarray,
        yv: np.ndarray,
        *,
        weights: np.ndarray | None,
        val_weights: np.ndarray | None,
        init: Model | None,
    ) -> _Data:
        """Standardise ``X`` and ``Xv`` (see :func:`_standardisation`); training weights average 1."""
        mu, sd = _standardisation(X, init)
        w = np.ones(len(X), np.float32) if weights is None else np.asarray(weights, np.float32) / np.mean(weights)
        wv = np.ones(len(Xv), np.float32) if val_weights is None else np.asarray(val_weights, np.float32)
        return cls(mu, sd, (X - mu) / sd, y, w, (Xv - mu) / sd, yv, wv)

    def val_loss(self, P: dict[str, np.ndarray]) -> float:
        """The weighted log loss of parameters ``P`` on the validation rows."""
        s = _forward(P, self.Zv)
        return float(np.average(np.logaddexp(0, s) - self.yv * s, weights=self.wv))

    def model(self, best: dict[str, np.ndarray]) -> Model:
        """The trained model: this standardisation and the ``best`` parameters."""
        return Model(
            mean=self.mean.astype(np.float32),
            scale=self.scale.astype(np.float32),
            W2=best["W2"],
            b2=best["b2"],
            W1=best.get("W1"),
            b1=best.get("b1"),
            threshold=0.5,
        )


@dataclass(frozen=True)
class _Schedule:
    """How training runs: Adam's step size, L2 and dropout, and when it stops."""

    lr: float
    l2: float
    dropout: float
    epochs: int
    batch: int
    patience: int


def _train_epochs(data: _Data, adam: _Adam, stop: _EarlyStop, schedule: _Schedule, rng: np.random.Generator) -> int:
    """Shuffled mini-batch epochs until ``stop`` says so or the epochs run out; how many ran."""
    ep = 0
    for ep in range(schedule.epochs):  # noqa: B007  (ep reported after the loop)
        order = rng.permutation(len(data.Z))
        for i in range(0, len(data.Z), schedule.batch):
            idx = order[i : i + schedule.batch]
            adam.step(
                data.Z[idx], data.y[idx], data.w[idx], l2=schedule.l2, dropout=schedule.dropout, lr=schedule.lr, rng=rng
            )
        if stop.should_stop(data.val_loss(adam.params), adam.params, schedule.patience):
            break
    return ep + 1


def fit(
    X: np.ndarray,
    y: np.ndarray,
    Xv: np.ndarray,
    yv: np.ndarray,
    *,
    hidden: int = 64,
    l2: float = 1e-3,
    lr: float = 3e-3,
    epochs: int = 200,
    batch: int = 128,
    patience: int = 20,
    dropout: float = 0.1,
    seed: int = 0,
    weights: np.ndarray | None = None,
    val_weights: np.ndarray | None = None,
    init: Model | None = None,
) -> tuple[Model, dict[str, float]]:
    """One-hidden-layer MLP (ReLU, sigmoid out) with Adam, L2 and early stopping on val loss.

    ``hidden=0`` gives plain logistic regression. ``weights`` scale each training row's
    loss (feedback pairs count more than the many built-in ones); ``init`` starts from a
    trained model (its standardisation and weights) instead of random weights.
    """
    rng = np.random.default_rng(seed)
    data = _Data.of(X, y, Xv, yv, weights=weights, val_weights=val_weights, init=init)
    adam = _Adam.start(_start_params(init, hidden, X.shape[1], rng), warm=init is not None)
    stop = _EarlyStop.start(data.val_loss, adam.params, warm=init is not None)
    schedule = _Schedule(lr=lr, l2=l2, dropout=dropout, epochs=epochs, batch=batch, patience=patience)
    epochs_run = _train_epochs(data, adam, stop, schedule, rng)
    return data.model(stop.best_params), {"val_loss": stop.best, "epochs": epochs_run}
