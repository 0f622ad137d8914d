"""Knowledge refinement (correct/refine.py): documents → strips → grades → the strips kept.

The evaluator is a marker fake so each test chooses the grades; what is tested is the
splitting, the keep / cap / fill rule, the order and the provenance of what is kept.
"""

from __future__ import annotations

import pytest

from crag.correct.refine import Doc, graded_text, make_strips, refine
from crag.testing.fakes import MarkerEvaluator
from crag.types import Query

pytestmark = pytest.mark.unit

EIFFEL = Doc(
    "d1",
    "The tower was designed by Gustave Eiffel's company. It opened in March 1889 for the fair. "
    "It is 330 metres tall today. Paris has many museums and long queues.",
    "eiffel.txt",
    "internal",
    title="Eiffel Tower",
    url="https://example.org/eiffel",
)


def test_strips_group_sentences_and_keep_provenance() -> None:
    strips = make_strips(EIFFEL, sentences_per_strip=2)
    assert [s.text.count(".") for s in strips] == [2, 2]  # four sentences, two per strip
    assert strips[0].text.startswith("The tower was designed") and "1889" in strips[0].text
    assert all((s.source, s.origin, s.title, s.url, s.doc_id) == ("eiffel.txt", "internal", "Eiffel Tower",
               "https://example.org/eiffel", "d1") for s in strips)  # fmt: skip


def test_a_short_dangling_fragment_joins_the_last_strip() -> None:
    doc = Doc("d", "Lake Lucerne lies in central Switzerland. It is deep in places. Yes.", "lake.txt", "internal")
    strips = make_strips(doc, sentences_per_strip=2)
    assert len(strips) == 1 and strips[0].text.endswith("Yes.")


def test_chinese_text_is_split_into_strips() -> None:
    # A strip holds at least 40 characters: short Chinese sentences are grouped until they do.
    text = ("天津犹太会堂位于天津市和平区营口道与南京路交口附近，是天津现存唯一的一座犹太教会堂建筑。"
            "会堂建成于1940年，由当时居住在天津的犹太侨民集资兴建，建筑面积约为八百多平方米。"
            "短句。")  # fmt: skip
    strips = make_strips(Doc("z", text, "tj.txt", "internal"), sentences_per_strip=1)
    assert len(strips) == 2 and "1940" in strips[1].text and strips[1].text.endswith("短句。")


def test_refine_keeps_relevant_strips_in_document_order(marker_evaluator: MarkerEvaluator) -> None:
    docs = [
        Doc(
            "a",
            "Noise about the weather today in the old town centre. The gold fact is written here in this sentence.",
            "a.txt",
            "internal",
        ),
        Doc(
            "b",
            "More noise about cooking pasta at home for the family. Another gold fact sits in this one, too.",
            "b.txt",
            "web",
        ),
    ]
    kept, graded = refine(Query.of("q"), docs, marker_evaluator, sentences_per_strip=1, keep=0.5, min_strips=1)
    assert [s.source for s in kept] == ["a.txt", "b.txt"]  # document order, not score order
    assert all("gold" in s.text for s in kept) and all(s.score == 0.9 for s in kept)
    assert len(graded) == 4 and sorted(s.score for s in graded) == [0.1, 0.1, 0.9, 0.9]  # every strip, graded


def test_refine_caps_at_max_strips_best_first() -> None:
    text = " ".join(f"Sentence number {i} is a gold sentence here." for i in range(6))
    evaluator = MarkerEvaluator({"number 4": 0.95, "gold": 0.8})
    kept, _ = refine(
        Query.of("q"), [Doc("d", text, "d.txt", "internal")], evaluator, sentences_per_strip=1, max_strips=2
    )
    assert len(kept) == 2 and any("number 4" in s.text for s in kept)  # the best one always makes the cut


def test_refine_fills_up_to_min_strips_when_few_pass() -> None:
    # Nothing reaches keep: the best-scoring strips still give the generator something to read.
    text = (
        "One partial remark about the lions of the savanna. A second plain sentence is written here. "
        "A third plain sentence is written over there."
    )
    kept, _ = refine(Query.of("q"), [Doc("d", text, "d.txt", "internal")], MarkerEvaluator(), sentences_per_strip=1,
                     keep=0.95, min_strips=2)  # fmt: skip
    assert len(kept) == 2 and "partial" in kept[0].text


def test_strips_are_graded_with_their_document_title(marker_evaluator: MarkerEvaluator) -> None:
    # A strip cut out of its document lost its subject; the title in front tells the grader.
    refine(Query.of("How tall is it?"), [EIFFEL], marker_evaluator, sentences_per_strip=2)
    assert marker_evaluator.graded and all(t.startswith("Eiffel Tower: ") for t in marker_evaluator.graded)
    assert graded_text("埃菲尔铁塔高330米。", "埃菲尔铁塔") == "埃菲尔铁塔高330米。"  # title already in it
    assert graded_text("它高330米。", "埃菲尔铁塔") == "埃菲尔铁塔：它高330米。"


def test_nothing_to_refine() -> None:
    assert refine(Query.of("q"), [], MarkerEvaluator()) == ([], [])
    assert refine(Query.of("q"), [Doc("e", "   ", "e.txt", "internal")], MarkerEvaluator()) == ([], [])


def test_a_heading_that_repeats_the_title_is_no_strip_in_either_language() -> None:
    # web pages open with their title; joined to the next sentence it hid whom that sentence defines
    actor = "Kyaw Swe (actor)"
    en = Doc("w1", f"{actor}\n\nKyaw Swe (, ; 1924 – 1982) was a Burmese actor.", "w", "web", actor)
    zh = Doc("w2", "王刚 (演员)\n\n王刚（1948年—），中国演员、主持人。", "w", "web", "王刚 (演员)")
    assert [s.text for s in make_strips(en, 2)] == ["Kyaw Swe (, ; 1924 – 1982) was a Burmese actor."]
    assert [s.text for s in make_strips(zh, 2)] == ["王刚（1948年—），中国演员、主持人。"]
    assert make_strips(en, 2)[0].title == "Kyaw Swe (actor)"
    # a text that is only its title, or opens with the title inside a sentence, keeps it
    assert [s.text for s in make_strips(Doc("w3", "Paris", "w", "web", "Paris"), 2)] == ["Paris"]
    opening = Doc("w4", "Paris is the capital of France. It is large.", "w", "web", "Paris")
    assert make_strips(opening, 2)[0].text.startswith("Paris is the capital")
