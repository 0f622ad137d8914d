"""A sentence about the asked person is never held by a source about someone else (both languages)."""

from __future__ import annotations

import pytest

from crag.generate.gate import SentenceGate
from crag.generate.subjects import about_another, question_names
from crag.types import Strip

pytestmark = pytest.mark.unit


def gate(question: str, sources: list[Strip], reply: str) -> SentenceGate:
    g = SentenceGate(question, sources)
    g.feed(reply)
    g.finish()
    return g


BUTSON = [
    Strip(
        "Christopher Butson, Church of Ireland bishop ; Christopher Butson (priest), Irish Anglican priest ;",
        "k65",
        "internal",
        "Butson",
    ),
    Strip(
        "He is a Distinguished Professor of Computer Science at the University of Utah.",
        "w66",
        "web",
        "Christopher R. Johnson",
    ),
]


def hidden_for_one_shown_for_the_other(sources: list[Strip], hidden: str, shown: str, reply: str, cite: int) -> None:
    """``reply`` (the asked name for ``{}``) is never shown asked about ``hidden``; about ``shown`` it is."""
    g = gate(f"What is {hidden}'s occupation?", sources, reply.format(hidden))
    assert g.text == "" and g.verdict() == "not in the sources"
    g = gate(f"What is {shown}'s occupation?", sources, reply.format(shown))
    assert g.claims and g.claims[0].cites == [cite]


def test_a_claim_about_the_asked_person_from_another_persons_source_is_not_shown() -> None:
    reply = "{} is a Distinguished Professor of Computer Science [2]."
    hidden_for_one_shown_for_the_other(BUTSON, "Christopher Butson", "Christopher Johnson", reply, 2)


def test_the_citation_moves_to_the_source_about_the_person() -> None:
    g = gate("What is Christopher Butson's occupation?", BUTSON, "Christopher Butson was an Irish Anglican priest [2].")
    assert g.claims and g.claims[0].cites == [1] and g.claims[0].how == "repaired"


def test_chinese_a_namesake_source_cannot_hold_the_claim() -> None:
    sources = [
        Strip("李明华（1960年—），中国演员，他主演过多部电视剧。", "a", "internal", "李明华"),
        Strip("李明（1921年—1993年），中国画家，他擅长山水画。", "b", "internal", "李明"),
    ]
    assert question_names("李明华是做什么的？")[0].text == "李明华"
    g = gate("李明华是做什么的？", sources, "李明华是中国画家，擅长山水画。[2]")
    assert g.text == ""
    g = gate("李明华是做什么的？", sources, "李明华是中国演员。[2]")
    assert g.claims and g.claims[0].cites == [1]


def test_sources_that_are_not_about_another_person_still_hold_a_claim() -> None:
    name = question_names("When did Gustave Eiffel build the tower?")[0]
    # the surname alone, no person at all, a fuller or shorter spelling of the name: not another person
    assert not about_another(name, Strip("Eiffel's firm built it in 1889.", "a", "web", "Eiffel Tower"))
    assert not about_another(name, Strip("The tower opened in 1889.", "a", "web", "Paris landmarks"))
    assert not about_another(name, Strip("Construction began in 1887.", "a", "web", "List of towers"))
    raymond = question_names("What is Raymond S. Burton's occupation?")[0]
    assert not about_another(raymond, Strip("He played rugby league.", "a", "web", "Raymond Burton (rugby league)"))


def test_a_source_about_another_bearer_of_the_surname_is_about_another_person() -> None:
    name = question_names("What is Bridie O'Flaherty's occupation?")[0]
    mayor = Strip("Terry O'Flaherty is a former Mayor of Galway.", "w180", "web", "Terry O'Flaherty")
    assert about_another(name, mayor)
    g = gate("What is Bridie O'Flaherty's occupation?", [mayor], "Bridie O'Flaherty is a former Mayor of Galway [1].")
    assert g.text == ""


def test_a_given_name_that_is_also_a_stop_word_is_still_a_name() -> None:
    name = question_names("What is Alan Mauritz Swanson's occupation?")[0]
    don = Strip(
        "Don R. Swanson (1924 – 2012) was an American information scientist.", "k", "internal", "Don R. Swanson"
    )
    assert about_another(name, don)


def test_a_page_that_calls_its_person_by_one_name_is_about_that_person() -> None:
    # no defining sentence: the page calls Alexander Mikhailovich Kozulin "Alexander"
    kozulin = Strip(
        "Alexander acts as a producer, concept creator and director. ; Alexander founded a festival in Berlin.",
        "k153",
        "internal",
        "Alexander Mikhailovich Kozulin",
    )
    johan = Strip("Gadolin discovered a new earth containing yttrium.", "k154", "internal", "Johan Gadolin")
    gadolin = question_names("What is Alexander Gadolin's occupation?")[0]
    assert about_another(gadolin, kozulin) and about_another(gadolin, johan)
    g = gate("What is Alexander Gadolin's occupation?", [kozulin, johan], "Alexander Gadolin is a producer [1].")
    assert g.text == ""
    # the page's own person, written with or without the middle name, is held by it
    assert not about_another(question_names("What is Alexander Kozulin's occupation?")[0], kozulin)
    assert not about_another(question_names("What did Johan Gadolin discover?")[0], johan)
    # a place or a thing that opens a sentence is no name of the title's person
    tower = Strip("Paris hosts the tower; it opened in 1889.", "t", "web", "Gustave Eiffel")
    assert not about_another(question_names("When did Alexander Gadolin visit Paris?")[0], tower)


CHALLIS = [
    Strip(
        "John Challis (1907–1974) was an American builder of harpsichords and clavichords.",
        "k60",
        "internal",
        "John Challis (harpsichord)",
    ),
    Strip("Roger Challis (born 1943) is an English former footballer.", "k61", "internal", "Roger Challis"),
]


def test_another_bearer_of_the_surname_does_not_answer_for_the_asked_person() -> None:
    # the sentence names John Challis whoever is asked about: asked about Thomas, it is dropped
    g = gate("What is Thomas Challis's occupation?", CHALLIS,
             "John Challis was an American builder of harpsichords and clavichords [1].")  # fmt: skip
    assert g.text == "" and g.verdict() == "not in the sources"
    g = gate("What is John Challis's occupation?", CHALLIS, "John Challis was an American builder of harpsichords [1].")
    assert g.claims and g.claims[0].cites == [1]


def test_a_relative_named_with_the_asked_person_in_a_source_answers() -> None:
    sources = [
        Strip("Pierre Curie married Marie Curie in 1895.", "k1", "internal", "Curie family"),
        Strip("Pierre Curie was a French physicist.", "k2", "internal", "Pierre Curie"),
    ]
    g = gate("Who was Marie Curie's husband?", sources, "Pierre Curie was a French physicist [2].")
    assert g.claims and g.text.startswith("Pierre Curie was a French physicist")


def test_chinese_another_bearer_of_a_transliterated_surname_is_dropped() -> None:
    sources = [
        Strip("约翰·查利斯（1907年—1974年），美国大键琴制造者。", "a", "internal", "约翰·查利斯"),
        Strip("罗杰·查利斯（1943年—），英国足球运动员。", "b", "internal", "罗杰·查利斯"),
    ]
    g = gate("托马斯·查利斯的职业是什么？", sources, "约翰·查利斯是美国大键琴制造者。[1]")
    assert g.text == "" and g.verdict() == "not in the sources"
    g = gate("约翰·查利斯的职业是什么？", sources, "约翰·查利斯是美国大键琴制造者。[1]")
    assert g.claims and g.claims[0].cites == [1]
    # a source that names both ties them: the father of the asked person
    tied = [Strip("托马斯·查利斯是约翰·查利斯的儿子。", "c", "internal", "托马斯·查利斯"), *sources]
    g = gate("托马斯·查利斯的父亲是做什么的？", tied, "约翰·查利斯是美国大键琴制造者。[2]")
    assert g.claims


def test_an_initial_may_stand_for_the_given_name() -> None:
    sources = [Strip("John Smith (born 1950) is a Welsh painter.", "a", "internal", "John Smith")]
    g = gate("What is J. Smith's occupation?", sources, "John Smith is a Welsh painter [1].")
    assert g.claims


def test_a_page_about_another_person_holds_a_claim_only_where_it_names_the_asked_one() -> None:
    terry = Strip(
        "Terry O'Flaherty is a former Mayor of Galway. A daughter of a previous Mayor, Bridie O'Flaherty, "
        "she was a guest at the 2004 parade in Seattle. She was first elected to Galway City Council in 1999 "
        "as a member of the Progressive Democrats.",
        "w180",
        "web",
        "Terry O'Flaherty",
    )
    # the daughter's election is not the mother's
    g = gate("What is Bridie O'Flaherty's occupation?", [terry],
             "Bridie O'Flaherty is a former Mayor of Galway City Council in 1999 [1].")  # fmt: skip
    assert g.text == "" and g.verdict() == "not in the sources"
    g = gate("What is Bridie O'Flaherty's occupation?", [terry], "Bridie O'Flaherty was a previous Mayor [1].")
    assert g.claims and g.claims[0].quotes == [
        "A daughter of a previous Mayor, Bridie O'Flaherty, she was a guest at the 2004 parade in Seattle."
    ]
    # asked about the page's own person, all of it counts
    g = gate("What is Terry O'Flaherty's occupation?", [terry],
             "Terry O'Flaherty was elected to Galway City Council in 1999 [1].")  # fmt: skip
    assert g.claims


def test_chinese_a_page_about_another_person_holds_a_claim_only_where_it_names_the_asked_one() -> None:
    terry = Strip(
        "特里·奥弗莱厄蒂（1960年—），爱尔兰政治人物，曾任戈尔韦市长。她的母亲布里迪·奥弗莱厄蒂也曾任市长。"
        "她于1999年当选戈尔韦市议员，为进步民主党成员。",
        "w1",
        "web",
        "特里·奥弗莱厄蒂",
    )
    g = gate("布里迪·奥弗莱厄蒂的职业是什么？", [terry], "布里迪·奥弗莱厄蒂于1999年当选戈尔韦市议员。[1]")
    assert g.text == "" and g.verdict() == "not in the sources"
    g = gate("布里迪·奥弗莱厄蒂的职业是什么？", [terry], "布里迪·奥弗莱厄蒂曾任市长。[1]")
    assert g.claims and g.claims[0].quotes == ["她的母亲布里迪·奥弗莱厄蒂也曾任市长。"]


def test_words_only_a_namesakes_page_has_are_that_persons_facts() -> None:
    sources = [
        Strip(
            "Mami Matsui is a Japanese voice actress affiliated with Aoni Production.", "k1", "internal", "Mami Matsui"
        ),
        Strip("Mami Matsuyama is a Japanese idol, singer, and actress.", "k2", "internal", "Mami Matsuyama"),
    ]
    g = gate("What is Mami Matsui's occupation?", sources, "Mami Matsui is a Japanese idol, singer, and actress [1].")
    assert g.text == ""
    g = gate("What is Mami Matsui's occupation?", sources, "Mami Matsui is a Japanese voice actress [1].")
    assert g.claims and g.claims[0].cites == [1]
    # one word only another page has can be the model's inference: it stands
    g = gate("What is Mami Matsui's occupation?", sources, "Mami Matsui is a Japanese voice actress and singer [1].")
    assert g.claims and g.claims[0].cites == [1]


def test_chinese_words_only_a_namesakes_page_has_are_that_persons_facts() -> None:
    sources = [
        Strip("李明华（1960年—），中国演员，他主演过多部电视剧。", "a", "internal", "李明华"),
        Strip("李明（1921年—1993年），中国画家，他擅长山水画。", "b", "internal", "李明"),
    ]
    g = gate("李明华是做什么的？", sources, "李明华是中国演员和画家，擅长山水画。[1]")
    assert g.text == ""
    g = gate("李明华是做什么的？", sources, "李明华是中国演员。[1]")
    assert g.claims and g.claims[0].cites == [1]


def test_a_title_with_a_lowercase_particle_names_its_person() -> None:
    cristiano = Strip(
        "Cristiano da Silva (; born 12 January 1987), sometimes known as just Cristiano, is a Brazilian footballer.",
        "w137",
        "web",
        "Cristiano da Silva",
    )
    g = gate("What is J. Da Silva's occupation?", [cristiano], "J. Da Silva is a Brazilian footballer [1].")
    assert g.text == ""


def test_a_page_that_names_the_asked_person_then_calls_them_by_surname_holds_the_claim() -> None:
    war = Strip(
        "Governor Robert Dinwiddie of Virginia was an investor in the Ohio Company. In October 1753 Dinwiddie "
        "ordered Major George Washington to warn the French to leave Virginia territory.",
        "en.jsonl#squad-014-020",
        "internal",
    )
    question = "Who did Governor Robert Dinwiddie order to warn the French to leave Virginia territory?"
    reply = (
        "Governor Robert Dinwiddie ordered Major George Washington to warn the French to leave Virginia territory [1]."
    )
    assert gate(question, [war], reply).claims
    # a page about another person that names the asked one, then calls him by surname
    terry = Strip(
        "Terry Walsh was a mayor. Her colleague Robert Dinwiddie joined in 1990. Dinwiddie later ordered "
        "Major George Washington to leave.",
        "w2",
        "web",
        "Terry Walsh",
    )
    g = gate(
        "Whom did Robert Dinwiddie order to leave?",
        [terry],
        "Robert Dinwiddie ordered Major George Washington to leave [1].",
    )
    assert g.claims and "Dinwiddie later ordered" in g.claims[0].quotes[0]
    zh = Strip(
        "特里·沃尔什是一位市长。她的同事罗伯特·丁威迪于1990年加入。丁威迪后来命令乔治·华盛顿离开。",
        "z",
        "web",
        "特里·沃尔什",
    )
    g = gate("罗伯特·丁威迪命令谁离开？", [zh], "罗伯特·丁威迪命令乔治·华盛顿离开。[1]")
    assert g.claims and "丁威迪后来命令" in g.claims[0].quotes[0]


def test_a_company_name_jieba_reads_as_a_person_is_not_the_sentence_subject() -> None:
    # 青岚 of 青岚科技 is tagged as a person's name: the answer "青岚科技高级测试工程师陈静毕业于…"
    # would then be about "青岚", and only the sentence naming 青岚 could hold it
    question = "青岚科技高级测试工程师陈静毕业于哪所大学？"
    assert [n.text for n in question_names(question)] == ["陈静"]
    assert [n.text for n in question_names("李明大学毕业于哪一年？")] == ["李明"]
    engineer = Strip("陈静（1995 年出生）是青岚科技的高级测试工程师。她 2019 年从南京理工大学毕业后加入公司。", "a",
                     "internal", "陈静（测试工程师）")  # fmt: skip
    g = gate(question, [engineer], "青岚科技高级测试工程师陈静毕业于南京理工大学。[1]")
    assert g.claims and g.claims[0].cites == [1], g.text
