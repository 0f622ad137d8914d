"""Fusion: duplicates, cross-source support, MMR diversity, token budget, contradictions."""

from __future__ import annotations

import numpy as np
import pytest

from crag.correct.contradict import CONFLICT_INSTRUCTION, Conflict, conflict_instruction, detect_conflicts
from crag.correct.diversity import mmr, similarity_matrix
from crag.correct.fuse import dedupe, fuse, fuse_ranked, near_duplicate
from crag.generate import tag
from crag.testing.fakes import HashEmbedder
from crag.types import Strip

pytestmark = pytest.mark.unit


def web(text: str, url: str, score: float) -> Strip:
    return Strip(text, url, "web", url=url, score=score)


def test_first_version_still_behaves() -> None:
    a = Strip("Zebras have stripes.", "a", "internal", score=0.9)
    b = Strip("Zebras have stripes!", "b", "web", score=0.5)
    c = Strip("Lions live in prides.", "c", "web", score=0.7)
    context, dupes = fuse([[a], [b, c]], max_chars=1000)
    assert context == [a, c] and dupes == 1
    assert near_duplicate("abc def", "abc def") and tag(a, "zh") == "[内部知识库]"


def test_dedupe_exact_near_contained_and_embedding() -> None:
    strips = [
        web("The Eiffel Tower is in Paris.", "https://a.org", 0.5),
        web("The Eiffel Tower is in Paris.", "https://b.org", 0.9),  # exact copy, better grade
        web("Eiffel Tower is in Paris", "https://c.org", 0.4),  # contained after trimming
        web("Paris hosts the famous iron lattice tower by Eiffel.", "https://d.org", 0.3),
        web("Kyoto has many temples.", "https://e.org", 0.2),
    ]
    keep, dupes = dedupe(strips)
    assert keep == [1, 3, 4]  # the better-graded copy survives; the contained one goes
    assert 0 not in keep and dupes >= 1
    # A paraphrase shares few characters; close vectors catch it.
    vectors = np.array([[1, 0], [1, 0], [1, 0.01], [0.99, 0.05], [0, 1]], dtype=np.float32)
    keep_v, dupes_v = dedupe(strips, vectors=vectors)
    assert keep_v == [1, 4] and dupes_v == 3


def test_support_from_independent_sources_lifts_a_strip() -> None:
    lone = web("The Eiffel Tower is 324 metres tall according to one blog.", "https://blog.example/x", 0.62)
    a = web("The Eiffel Tower is 330 metres tall.", "https://en.wikipedia.org/eiffel", 0.6)
    b = web("Standing 330 m, the Eiffel Tower is the tallest structure in Paris.", "https://toureiffel.paris/", 0.55)
    r = fuse_ranked([[lone, a, b]], max_tokens=500, diversity=False, detect_contradictions=False)
    assert r.context[0] is a  # 0.6 + support bonus beats the single site's 0.62
    assert dict(zip([s.url for s in r.context], r.support, strict=True))["https://en.wikipedia.org/eiffel"] == 2
    assert len(r.scores) == len(r.context) == len(r.support)


def test_same_domain_twice_is_one_source() -> None:
    a = web("The Eiffel Tower is 330 metres tall.", "https://wiki.example/a", 0.6)
    b = web("Standing 330 m, the Eiffel Tower dominates Paris.", "https://wiki.example/b", 0.5)
    assert fuse_ranked([[a, b]], max_tokens=500).support == [1, 1]


def test_mmr_prefers_novel_strips_and_lambda_one_is_plain_ranking() -> None:
    strips = [
        Strip("Paris is the capital of France.", "a", "web", score=0.9),
        Strip("Paris is the capital city of France.", "b", "web", score=0.88),
        Strip("The euro is used in France.", "c", "web", score=0.6),
    ]
    assert mmr(strips, None, None, 0.5, 2) == [0, 2]
    assert mmr(strips, None, None, 1.0) == [0, 1, 2]
    emb = HashEmbedder()
    vecs = emb.embed([s.text for s in strips], kind="passage")
    q = emb.embed(["capital of France"], kind="query")[0]
    assert mmr(strips, vecs, q, 0.5, 2)[1] == 2
    assert similarity_matrix(["a"], None).shape == (1, 1)
    with pytest.raises(ValueError):
        mmr(strips, None, None, 1.5)


def test_fuse_ranked_fits_the_token_budget_and_keeps_provenance() -> None:
    internal = [
        Strip(
            f"Internal fact number {i} about zebras and their stripes.", f"doc{i}.txt", "internal", score=0.9 - i / 100
        )
        for i in range(10)
    ]
    r = fuse_ranked([internal], max_tokens=40)
    assert 1 <= len(r.context) < 10 and r.duplicates == 0
    assert all(s.origin == "internal" for s in r.context)
    assert fuse_ranked([[], []], max_tokens=10).context == []


def test_contradiction_years_values_and_negation_en_zh() -> None:
    strips = [
        web("The Eiffel Tower was completed in 1889.", "https://a.org", 0.9),
        web("The Eiffel Tower was completed in 1887.", "https://b.org", 0.8),
        web("埃菲尔铁塔高330米。", "https://c.org", 0.7),
        web("埃菲尔铁塔高324米。", "https://d.org", 0.6),
        web("鲁迅不是浙江绍兴人。", "https://e.org", 0.5),
        web("鲁迅是浙江绍兴人。", "https://f.org", 0.4),
    ]
    found = detect_conflicts(strips)
    assert [(c.a_index, c.b_index) for c in found] == [(0, 1), (2, 3), (4, 5)]
    assert "1889 vs 1887" in found[0].reason and "330 米 vs 324 米" in found[1].reason
    assert "negates" in found[2].reason


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("The Eiffel Tower was completed in 1889.", "The Louvre opened in 1793."),  # different subjects
        ("The Eiffel Tower was completed in 1889.", "The Eiffel Tower was completed in 1889!"),  # agree
        ("The Eiffel Tower is 330 metres tall.", "The Eiffel Tower receives 7 million visitors a year."),
        ("Zebras are not horses.", "Lions are cats."),
    ],
)
def test_no_conflict_without_a_shared_subject_and_a_clash(a: str, b: str) -> None:
    assert detect_conflicts([a, b]) == []


def test_conflict_instruction_bilingual() -> None:
    conflicts = [Conflict(0, 2, "different years: 1889 vs 1887")]
    en = conflict_instruction(conflicts, "en")
    zh = conflict_instruction(conflicts, "zh")
    assert "[1] vs [3]" in en and "source number" in en
    assert "[1] vs [3]" in zh and "来源编号" in zh
    assert conflict_instruction([], "en") == "" and set(CONFLICT_INSTRUCTION) == {"en", "zh"}


def test_fuse_ranked_reports_conflicts_on_context_positions() -> None:
    a = web("The Eiffel Tower was completed in 1889.", "https://a.org", 0.9)
    filler = web("Kyoto has many old temples and gardens.", "https://k.org", 0.8)
    b = web("The Eiffel Tower was completed in 1887.", "https://b.org", 0.7)
    r = fuse_ranked([[a, filler], [b]], max_tokens=500, diversity=False)
    assert [s.url for s in r.context] == ["https://a.org", "https://k.org", "https://b.org"]
    assert r.conflicts == [Conflict(0, 2, "different years: 1889 vs 1887")]
