"""Bearer detection: which people of the asked name the strips describe, in English and Chinese."""

from __future__ import annotations

import pytest

from crag.correct.bearers import Bearers, find_bearers, namesakes_of
from crag.correct.names import Name, asks_who, define, descriptor, dotted_names, split_title
from crag.correct.posts import post_of
from crag.correct.refine import Doc, refine
from crag.types import Evaluation, Grade, Passage, Query, Strip

pytestmark = pytest.mark.unit


def strip(text: str, title: str = "", source: str = "kb.jsonl", score: float = 0.5) -> Strip:
    return Strip(text, source, "internal", title, score=score)


HARRIS = [
    strip("Richard Harris (1930–2002) was an Irish actor and singer.", "Richard Harris", score=0.9),
    strip("Richard Harris (born 1941) is a British composer of film music.", "Richard Harris (composer)", score=0.6),
    strip("He wrote the score of The Long Road in 1979.", "Richard Harris (composer)", score=0.4),
    strip("Chris Harris (born 1967) is an English cricketer.", "Chris Harris", score=0.8),
]
LI_MING = [
    strip("李明（1921年—1993年），中国画家，擅长山水画。", "李明 (画家)", score=0.8),
    strip("他曾任教于南京师范学院美术系。", "李明 (画家)", score=0.5),
    strip("李明（1975年—），中国足球运动员，司职后卫。", "李明 (足球运动员)", score=0.7),
    strip("李明华（1960年—），中国演员。", "李明华", score=0.9),
]


class Flat:
    """Grades every passage 0.8: the tests choose what refine keeps by the question alone."""

    name = "flat"

    def grade(self, query: Query, passages: list[Passage]) -> Evaluation:
        return Evaluation([Grade(p.id, 0.8) for p in passages], 0.8, "", self.name)


def bearers_of(question: str, pages: list[tuple[str, str]]) -> Bearers:
    """The bearers in ``pages`` (title, text), each refined into one-sentence strips."""
    docs = [Doc(str(i), text, f"w{i}", "external", title) for i, (title, text) in enumerate(pages)]
    _, strips = refine(Query.of(question), docs, Flat(), sentences_per_strip=1)
    return find_bearers(Query.of(question), strips)


def test_english_titles_tell_the_bearers_apart_best_supported_first() -> None:
    found = find_bearers(Query.of("What is Richard Harris's occupation?"), HARRIS)
    assert found.several and found.asks_who and found.name == "Richard Harris"
    actor, composer = found.bearers
    assert (actor.description, actor.life, actor.cites) == ("an Irish actor and singer", "1930–2002", [1])
    assert (composer.disambiguator, composer.life, composer.cites) == ("composer", "born 1941", [2, 3])
    assert composer.quote == "Richard Harris (born 1941) is a British composer of film music."
    assert found.listed() == found.bearers and found.chosen is None


def test_chinese_titles_and_a_longer_name_that_contains_it() -> None:
    found = find_bearers(Query.of("李明是做什么的？"), LI_MING)
    assert found.several and found.asks_who and found.name == "李明"
    assert [(b.description, b.life, b.cites) for b in found.bearers] == [
        ("中国画家", "1921年—1993年", [1, 2]),
        ("中国足球运动员", "1975年出生", [3]),
    ]  # 李明华 is another name


def test_untitled_documents_differ_by_life_years_and_what_they_do() -> None:
    texts = [
        strip("林海生（1932年—2001年），中国地质学家，长期从事青藏高原地质调查。", "人物档案一", "a.md"),
        strip("他曾任中国地质大学校长。", "人物档案一", "a.md"),
        strip("林海生（1968年—），台湾歌手，与地质学家林海生同名。", "人物档案二", "b.md"),
    ]
    found = find_bearers(Query.of("林海生出生于哪一年？"), texts)
    assert found.several and not found.asks_who
    assert [b.cites for b in found.bearers] == [[1, 2], [3]]
    same = [
        strip("Anna Berrow (1902–1977) was a Scottish civil engineer.", "", "a.md"),
        strip("Anna Berrow (1902–1977) was a civil engineer who built dams.", "", "b.md"),
    ]
    assert not find_bearers(Query.of("Who was Anna Berrow?"), same).several  # one person in two files


def test_one_bearer_similar_names_and_places_are_not_listed() -> None:
    assert not find_bearers(Query.of("What does Chris Harris do?"), HARRIS).several
    rivers = [
        strip("雅芳河（Avon）是英格兰西南部的一条河流，流经布里斯托。", "雅芳河 (布里斯托)"),
        strip("雅芳河是英格兰南部的一条河流，流经汉普郡。", "雅芳河 (汉普郡)"),
    ]
    assert not find_bearers(Query.of("该雅芳河最终注入什么地方？"), rivers).several
    stations = [
        strip("River Avon (Bristol) is a river in the south west of England.", "River Avon (Bristol)"),
        strip("River Avon (Hampshire) is a river in the south of England.", "River Avon (Hampshire)"),
    ]
    assert not find_bearers(Query.of("Where does the River Avon flow?"), stations).bearers
    senior = [
        strip("Franz Seitz Sr. (1887–1952) was a German film director.", "Franz Seitz Sr."),
        strip("Franz Seitz Jr. (1921–2006) was a German film producer.", "Franz Seitz Jr."),
    ]
    assert not find_bearers(Query.of("What is Franz Seitz Sr.'s occupation?"), senior).several


@pytest.mark.parametrize(
    ("question", "asked", "chosen", "others"),
    [
        ("When was the British composer Richard Harris born?", "British composer", 1, {0}),
        ("Which film did the composer Richard Harris score?", "composer", 1, {0}),
        ("What films did Richard Harris, the actor, appear in?", "actor", 0, {1, 2}),  # from the description
    ],
)
def test_a_question_that_names_one_bearer_chooses_it(question: str, asked: str, chosen: int, others: set[int]) -> None:
    found = find_bearers(Query.of(question), HARRIS)
    assert found.asked == asked and not found.several
    assert found.chosen is found.bearers[chosen] and found.listed() == [found.chosen]
    why = namesakes_of(Query.of(question), HARRIS)
    assert set(why) == others
    assert all(w == f"about another Richard Harris, not the {asked} the question names" for w in why.values())


def test_a_chinese_question_that_names_one_bearer() -> None:
    found = find_bearers(Query.of("画家李明曾在哪所学校任教？"), LI_MING)
    assert found.asked == "画家" and found.chosen is not None and found.chosen.cites == [1, 2]
    assert set(namesakes_of(Query.of("足球运动员李明司职什么位置？"), LI_MING)) == {0, 1}
    assert namesakes_of(Query.of("李明的职业是什么？"), LI_MING) == {}  # names no one: nothing is demoted


def test_the_one_defined_bearer_is_a_namesake_when_the_qualifier_fits_another_strip() -> None:
    # the CFO is named on a leadership page (its heading says the post, no sentence does); the
    # only 陈静 defined is an engineer: her strips are about another 陈静 (her university is not
    # the CFO's)
    zh = [
        strip("陈静于 2017 年加入青岚科技，负责财务和内部审计。", "青岚科技管理团队：首席财务官"),
        strip("陈静（1995 年出生）是青岚科技的高级测试工程师。她 2019 年从南京理工大学毕业。", "人物"),
    ]
    assert set(namesakes_of(Query.of("青岚科技首席财务官陈静毕业于哪所大学？"), zh)) == {1}
    assert namesakes_of(Query.of("测试工程师陈静毕业于哪所大学？"), zh) == {}  # she is the one asked
    assert namesakes_of(Query.of("陈静毕业于哪所大学？"), zh) == {}  # no qualifier: nothing demoted
    en = [
        strip("David Sato joined Kestrel Labs in 2015 and is its chief financial officer.", "Kestrel Labs leadership"),
        strip("David Sato (born 1990) is a test engineer at Kestrel Labs. He studied at Ohio State.", "People"),
    ]
    assert set(namesakes_of(Query.of("Where did the chief financial officer David Sato study?"), en)) == {1}
    # no other strip fits the qualifier: the description may just be partial, nothing is demoted
    assert namesakes_of(Query.of("Where did the chief financial officer David Sato study?"), en[1:]) == {}


def test_a_qualifier_that_fits_no_bearer_chooses_none() -> None:
    found = find_bearers(Query.of("When did the Welsh poet Richard Harris die?"), HARRIS)
    assert found.asked == "Welsh poet" and found.chosen is None and not found.several and found.listed() == []


def test_refine_grades_the_other_bearers_strips_at_most_tau_low() -> None:
    docs = [Doc(str(i), s.text, s.source, "internal", s.title) for i, s in enumerate(HARRIS[:3])]
    query = Query("When was the British composer Richard Harris born?", "en", lower=0.2)
    _, graded = refine(query, docs, Flat(), sentences_per_strip=1)
    assert [s.score for s in graded] == [0.2, 0.8, 0.8]


def test_names_compare_as_people_write_them() -> None:
    assert split_title("Jean Gabriel Marie (1907–1970)") == ("Jean Gabriel Marie", "1907–1970")
    assert split_title("理查德·哈里斯（作曲家）") == ("理查德·哈里斯", "作曲家")
    assert Name.of("Nándor Balázs") == Name.of("Nandor Balazs")
    assert Name.of("Maurice Boucher").find("What is Maurice Le Boucher's occupation?") is None  # a particle
    assert Name.of("George Esslemont").find("What is George Birnie Esslemont's occupation?") == (8, 31)
    assert Name.of("理查德哈里斯").find("理查德・哈里斯是谁？") == (0, 7)
    assert Name.of("李明是") is None and Name.of("Timme") is None
    assert dotted_names("英国作曲家理查德·哈里斯创作了什么作品？") == ["理查德·哈里斯"]
    # a long part the segmenter cuts in pieces stays whole; a title before the name is no part of it
    assert dotted_names("彼得·吕姆克尔夫在什么杂志上发表了文章？") == ["彼得·吕姆克尔夫"]
    assert dotted_names("中国中兽是由菲利浦·金格里奇在哪里发现的？") == ["菲利浦·金格里奇"]
    assert dotted_names("队内有另一位巨星威尔特·张伯伦。") == ["威尔特·张伯伦"]


def test_defining_sentences_in_both_languages() -> None:
    name = Name.of("John Barnes")
    assert name is not None
    athlete = define("John Barnes (October 12, 1929 &ndash; August 25, 2004) was an American runner.", name)
    assert athlete is not None and (athlete.life, athlete.description) == ("1929–2004", "an American runner")
    long = define("John Charles Bryan Barnes MBE (born 7 November 1963) is a former football player and manager.", name)
    assert long is not None and long.description == "a former football player and manager"
    zh = Name.of("王淑芬")
    assert zh is not None
    chemist = define("王淑芬是一位中国化学家，现任南开大学化学学院院长。", zh)
    assert chemist is not None and (chemist.years, chemist.description) == ((), "中国化学家")


def test_the_qualifier_and_who_questions() -> None:
    q = "Which cathedral employed the composer Richard Hadley as organist?"
    at = Name.of("Richard Hadley").find(q)  # type: ignore[union-attr]
    assert at is not None and descriptor(q, at) == "composer" and not asks_who(q, at)
    q = "Who was Richard Hadley?"
    at = Name.of("Richard Hadley").find(q)  # type: ignore[union-attr]
    assert at is not None and descriptor(q, at) == "" and asks_who(q, at)
    assert descriptor("Who taught the son of Richard Hadley?", (26, 40)) == ""  # "son of": not a qualifier
    assert descriptor("律师赵国栋毕业于哪所大学？", (2, 5)) == "律师"
    assert descriptor("哪位画家教过赵国栋？", (6, 9)) == ""  # the qualifier must touch the name


def test_a_list_of_people_names_each_bearer_in_both_languages() -> None:
    # a surname page: no "is"/"was", one bearer per item; the native spelling in brackets is no disambiguator
    items = [
        strip(
            "Christopher Butson, Church of Ireland bishop ; Christopher Butson (priest), Irish Anglican priest ;",
            "Butson",
        ),
        strip("Masayoshi Okada (岡田 正義), Japanese footballer ; Matthew Butson, New Zealand skier", "Butson", "b"),
    ]
    found = find_bearers(Query.of("What is Christopher Butson's occupation?"), items)
    assert found.several and found.asks_who
    assert [(b.disambiguator, b.description, b.cites) for b in found.bearers] == [
        ("", "Church of Ireland bishop", [1]),
        ("priest", "Irish Anglican priest", [1]),
    ]
    zh = [
        strip("张伟（1958年—），中国作家；张伟（1977年—），中国篮球运动员；张伟华（1960年—），演员。", "张伟 (消歧义)")
    ]
    found = find_bearers(Query.of("张伟是做什么的？"), zh)
    assert found.several and [(b.description, b.life) for b in found.bearers] == [
        ("中国作家", "1958年出生"),
        ("中国篮球运动员", "1977年出生"),
    ]


def test_a_list_item_and_the_article_of_one_person_are_one_bearer() -> None:
    texts = [
        strip("Kyriakos Mavronikolas (born 25 January 1955) is a Cypriot politician.", "Kyriakos Mavronikolas", "a"),
        strip("Kyriakos Mavronikolas (b. 1955), Cypriot Minister of Defence (2003–2006) ;", "List of alumni", "b"),
    ]
    found = find_bearers(Query.of("What is Kyriakos Mavronikolas's occupation?"), texts)
    assert not found.several and len(found.bearers) == 1


def test_prose_with_a_comma_is_no_list() -> None:
    texts = [
        strip("John Carter, a painter from Cardiff, exhibited in 1920.", "Exhibitions", "a"),
        strip("John Carter (born 1902) was a Scottish civil engineer.", "John Carter (engineer)", "b"),
    ]
    assert len(find_bearers(Query.of("What is John Carter's occupation?"), texts).bearers) == 1


def test_the_fuller_name_in_the_question_singles_out_its_bearer() -> None:
    texts = [
        strip(
            'Raymond S. "Ray" Burton (August 13, 1939 &ndash; November 12, 2013) was a New Hampshire politician.',
            "Raymond S. Burton",
        ),
        strip("Raymond Burton is a former professional rugby league footballer.", "Raymond Burton (rugby league)"),
    ]
    found = find_bearers(Query.of("What is Raymond S. Burton's occupation?"), texts)
    assert not found.several and found.asked == "Raymond S. Burton"
    assert found.chosen is not None and found.chosen.description == "a New Hampshire politician"
    assert found.others() == {2}
    # the shorter name is both people's: listed, not chosen
    both = find_bearers(Query.of("What is Raymond Burton's occupation?"), texts)
    assert both.several and both.chosen is None
    # a longer name in a title is another person's ("John Barnes Chance" is not John Barnes)
    assert not Name.of("Kyaw Swe").compatible(Name.of("Kyaw Swe Win"))  # type: ignore[arg-type]


def test_sentences_do_not_end_at_an_entity_or_an_initial() -> None:
    from crag.text import split_sentences

    assert split_sentences("Richard E. Myers (born 1934) is a politician. He lives in Iowa.") == [
        "Richard E. Myers (born 1934) is a politician.",
        "He lives in Iowa.",
    ]
    assert split_sentences("Burton (1939 &ndash; 2013) served; he won.") == [
        "Burton (1939 &ndash; 2013) served;",
        "he won.",
    ]
    assert split_sentences("他生于1939年；2013年去世。") == ["他生于1939年；", "2013年去世。"]


def test_a_terminator_inside_life_years_does_not_hide_the_bearer() -> None:
    # "(, ; 10 February 1924 – 1982)": the ";" of a dropped native spelling cut the defining
    # sentence in two, and the actor was not seen as a bearer at all
    pages = [
        ("Kyaw Swe (politician)", "Kyaw Swe (; born 1 December 1979) is a Burmese politician. He is an MP."),
        ("Kyaw Swe (actor)", "Kyaw Swe (, ; 10 February 1924 – 15 August 1982) was a Burmese actor and film director."),
    ]
    found = bearers_of("What is Kyaw Swe's occupation?", pages)
    assert found.several and [b.disambiguator for b in found.bearers] == ["politician", "actor"]
    zh_pages = [
        ("王刚 (演员)", "王刚（本名王刚；1948年—），中国演员，主持人。"),
        ("王刚 (画家)", "王刚（字子坚；1960年—），中国画家。"),
    ]
    found = bearers_of("王刚是做什么的？", zh_pages)
    assert found.several and [b.life for b in found.bearers] == ["1948年出生", "1960年出生"]


# A company page introduces its people by the post they hold, not with "X is a …".
CHEN_JING = [
    strip(
        "陈静（1995 年出生）是青岚科技苏州总部的高级测试工程师，负责空气净化器的噪音和能效测试。"
        "她 2019 年从南京理工大学毕业后加入公司。",
        "陈静（测试工程师）",
        "people/陈静.md",
        0.85,
    ),
    strip(
        "陈静于 2017 年加入青岚科技，现任首席财务官，负责财务、投资者关系和内部审计。她是中国注册会计师。",
        "青岚科技管理团队（2023 年 12 月更新）",
        "管理团队.md",
        0.72,
    ),
]
WANG_LEI = [
    strip("Wang Lei (born 1984) is a hardware engineer at Kestrel Labs.", "Wang Lei (engineer)", "people/wang.md", 0.8),
    strip(
        "Wang Lei joined Kestrel Labs in 2016 and is now the sales director for southern China. She lives in Shenzhen.",
        "Kestrel Labs sales team",
        "sales.md",
        0.7,
    ),
]


@pytest.mark.parametrize(
    ("sentence", "name", "post"),
    [
        ("陈静于 2017 年加入青岚科技，现任首席财务官，负责财务。", "陈静", "首席财务官"),
        ("赵启明 2012 年创办公司，担任董事长兼总经理。", "赵启明", "董事长兼总经理"),
        ("Wang Lei joined Kestrel Labs in 2016 and is now the sales director.", "Wang Lei", "the sales director"),
        (
            "Marcus Hale, a co-founder, serves as the chief technology officer.",
            "Marcus Hale",
            "the chief technology officer",
        ),
    ],
)
def test_a_post_held_defines_the_person(sentence: str, name: str, post: str) -> None:
    found = post_of(sentence, Name.of(name))  # type: ignore[arg-type]
    assert found is not None and found.description == post


def test_a_post_of_another_name_or_no_post_defines_nobody() -> None:
    assert post_of("王磊于 2016 年加入公司，现任销售总监。", Name.of("陈静")) is None  # type: ignore[arg-type]
    assert post_of("陈静于 2017 年加入青岚科技，负责内部审计。", Name.of("陈静")) is None  # type: ignore[arg-type]
    assert post_of("Lin Qiao is now in Berlin.", Name.of("Lin Qiao")) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(("people", "question"), [(CHEN_JING, "陈静是谁？"), (WANG_LEI, "Who is Wang Lei?")])
def test_a_person_named_by_post_is_a_bearer_of_their_own(people: list[Strip], question: str) -> None:
    found = find_bearers(Query.of(question), people)
    assert found.several
    assert [b.cites for b in found.bearers] == [[1], [2]]


def test_the_post_asked_singles_out_its_holder_beside_a_shared_company() -> None:
    # Both 陈静 work at 青岚科技: the company words tie, 首席财务官 decides.
    cfo = find_bearers(Query.of("青岚科技首席财务官陈静毕业于哪所大学？"), CHEN_JING)
    assert cfo.chosen is not None and cfo.chosen.cites == [2]
    assert namesakes_of(Query.of("青岚科技首席财务官陈静毕业于哪所大学？"), CHEN_JING) == {
        0: "about another 陈静, not the 青岚科技首席财务官 the question names"
    }
    engineer = find_bearers(Query.of("青岚科技测试工程师陈静毕业于哪所大学？"), CHEN_JING)
    assert engineer.chosen is not None and engineer.chosen.cites == [1]


ORG_CHART = [
    strip("电池与电源组 | 负责人: 王磊（Wang Lei），首席硬件工程师 | 所在地: 杭州", "组织架构", "org.md", 0.6),
    strip("销售事业部·华南区 | 负责人: 王磊（Wang Lei），华南区销售总监 | 所在地: 深圳", "组织架构", "org.md", 0.5),
    strip("硬件事业部 | 负责人: 孙启航 | 所在地: 杭州", "组织架构", "org.md", 0.4),
]
ORG_CHART_EN = [
    strip("Battery group | Lead: Maria Costa, Chief Hardware Engineer | Site: Porto", "Org chart", "org.md", 0.6),
    strip("Sales, south | Lead: Maria Costa, Regional Sales Director | Site: Lisbon", "Org chart", "org.md", 0.5),
    strip("Software | Lead: Tom Reyes | Site: Porto", "Org chart", "org.md", 0.4),
]


@pytest.mark.parametrize(("rows", "question"), [(ORG_CHART, "王磊是谁？"), (ORG_CHART_EN, "Who is Maria Costa?")])
def test_rows_of_one_name_with_posts_that_share_no_word_are_two_people(rows: list[Strip], question: str) -> None:
    found = find_bearers(Query.of(question), rows)
    assert found.several and [b.cites for b in found.bearers] == [[1], [2]]  # the third row is no one's


def test_rows_of_one_name_and_one_post_are_one_person() -> None:
    lab = "电池实验室 | 负责人: 王磊（Wang Lei），首席硬件工程师 | 所在地: 杭州"
    same = [ORG_CHART[0], strip(lab, "组织架构", "org.md")]
    found = find_bearers(Query.of("王磊是谁？"), same)
    assert not found.several and [b.cites for b in found.bearers] == [[1, 2]]


def test_a_row_post_asked_singles_out_its_row() -> None:
    found = find_bearers(Query.of("华南区销售总监王磊在哪里办公？"), ORG_CHART)
    assert found.chosen is not None and found.chosen.cites == [2]
