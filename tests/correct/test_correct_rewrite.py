"""Query rewriting: gap queries only for meaningful missing terms; LLM prompt; recall on the sample."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from crag.config import CragSettings
from crag.correct.rewrite import gap_terms, keyword_queries, llm_queries
from crag.errors import LLMReplyError
from crag.testing.fakes import ScriptedLLM
from crag.types import Query

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample"


@pytest.mark.unit
def test_no_gap_query_for_verbs_or_generic_words() -> None:
    docs = ["The Yuan dynasty was founded by Kublai Khan."]
    assert keyword_queries(Query.of("What dynasty came after the Yuan?"), docs) == ["dynasty after yuan"]
    assert gap_terms(Query.of("What dynasty came after the Yuan?"), docs) == []


@pytest.mark.unit
def test_gap_query_targets_missing_entities() -> None:
    docs = ["The tower in Paris is 330 metres tall."]
    assert keyword_queries(Query.of("Who designed the Eiffel Tower?"), docs) == [
        "designed eiffel tower",
        "eiffel tower",
    ]
    assert keyword_queries(Query.of("Who designed the Eiffel Tower?"), docs, max_queries=1) == ["designed eiffel tower"]
    zh = keyword_queries(Query.of("妊娠期使用庆大霉素可能会导致什么后果？"), ["庆大霉素是一种抗生素。"])
    assert zh == ["妊娠期 庆大霉素 后果", "妊娠期 庆大霉素"]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("question", "docs", "must_keep"),
    [
        ("What dynasty came after the Yuan?", ["The Yuan dynasty was founded by Kublai Khan."], ["after", "yuan"]),
        ("Who was the first president of Harvard?", ["Harvard is a university."], ["first", "harvard"]),
        ("What was the largest city in Poland in 1816?", ["Warsaw is a city."], ["largest", "1816", "poland"]),
        ("Which team played before the Broncos in 2015?", [], ["before", "broncos", "2015"]),
        ('Who edited "The Economist" first?', [], ['"The Economist"', "first"]),
        ("元朝之后是哪个朝代？", ["元朝是蒙古人建立的。"], ["元朝", "之后"]),
        ("中国第一个获得诺贝尔奖的人是谁？", [], ["第一", "诺贝尔奖"]),
        ("世界上最大的湖泊是哪个？", ["湖泊是水体。"], ["最大", "湖泊"]),
        ("1990年之前谁是美国总统？", [], ["1990", "之前", "总统"]),
        ("《红楼梦》的作者是谁？", [], ["《红楼梦》", "作者"]),
    ],
)
def test_rewrites_keep_relation_words_numbers_and_quoted_names(
    question: str, docs: list[str], must_keep: list[str]
) -> None:
    for query in keyword_queries(Query.of(question), docs, max_queries=2):
        for term in must_keep:
            assert term in query, (question, query, term)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("question", "name"),
    [
        ("祭遵小时候喜欢读什么书？", "祭遵"),  # jieba: 祭 / 遵, both one character
        ("朱祐杬的母亲是谁？", "朱祐杬"),  # 朱 / 祐 / 杬
        ("谁杀了司马晏？", "司马晏"),  # 司马 / 晏: the surname alone named nobody
        ("司马繇是谁的儿子？", "司马繇"),  # 繇 is tagged as a preposition
        ("雅芳河最后流入哪里？", "雅芳河"),
    ],
)
def test_chinese_names_cut_into_single_characters_stay_whole(question: str, name: str) -> None:
    for docs in ([], ["无关的文字。"]):
        for query in keyword_queries(Query.of(question), docs, max_queries=2):
            assert name in query.split(), (question, query)
    # Function words around a name are not glued to it.
    assert keyword_queries(Query.of("谁杀了司马晏？"), [])[0] == "司马晏"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("question", "kept"),
    [
        ("作曲家理查德·哈里斯出生于哪一年？", ["作曲家", "理查德·哈里斯"]),  # jieba: 理查德 / 哈里斯出 / 生于
        ("迈克尔·哈钦斯的职业是什么？", ["迈克尔·哈钦斯"]),  # 哈 / 钦 / 斯
        ("When was the Welsh painter John Carter born?", ["welsh", "painter", "john", "carter"]),
    ],
)
def test_a_qualified_or_transliterated_name_is_searched_whole(question: str, kept: list[str]) -> None:
    """The bearer a question names is searched with its qualifier, a transliterated name in one piece."""
    for docs in ([], ["理查德·哈里斯是爱尔兰演员。", "John Carter was a Scottish civil engineer."]):
        first = keyword_queries(Query.of(question), docs)[0].split()
        assert all(term in first for term in kept), (question, first)
        assert not any(t != n and t in n for t in first for n in kept if "·" in n), first  # no name pieces


@pytest.mark.unit
def test_full_width_numbers_are_searched_once() -> None:
    assert keyword_queries(Query.of("１８８７年什么联盟加入了国际联盟？"), []) == ["1887 联盟 加入 国际联盟"]
    assert keyword_queries(Query.of("《虫，眼球系列》的主角叫什么名字？"), [])[0].startswith("《虫，眼球系列》")


@pytest.mark.unit
def test_question_fillers_are_dropped_but_something_always_remains() -> None:
    assert keyword_queries(Query.of("纯净的四氟化碳首次被制得是在哪一年？"), [])[0].split()[-1] != "哪一年"
    assert keyword_queries(Query.of("what?"), []) == ["what?"]


@pytest.mark.unit
def test_llm_rewrite_prompt_is_about_the_gap_in_both_languages() -> None:
    en = ScriptedLLM(['{"queries": ["eiffel tower architect", "eiffel tower architect"]}'])
    assert llm_queries(Query.of("Who designed the Eiffel Tower?"), ["It is 330 m tall."], en) == [
        "eiffel tower architect"
    ]
    assert "lack" in en.prompts[0][0]["content"] and "330 m" in en.prompts[0][0]["content"]
    zh = ScriptedLLM(['{"queries": ["埃菲尔铁塔 设计者"]}'])
    llm_queries(Query.of("谁设计了埃菲尔铁塔？"), [], zh)
    assert "缺少" in zh.prompts[0][0]["content"]
    with pytest.raises(LLMReplyError, match="no queries"):  # an LLMError: callers degrade on CragError
        llm_queries(Query.of("q"), [], ScriptedLLM(["no json"]))


@pytest.mark.integration
@pytest.mark.slow
def test_keyword_rewrite_recall_at_least_verbatim(tmp_path: Path) -> None:
    """Ambiguous + incorrect sample questions: gold passage in the corpus provider's top 5."""
    from crag.embed.cache import make_embedder
    from crag.kb import KnowledgeBase, index_corpus
    from crag.search.corpus import CorpusSearch

    embedder = make_embedder(CragSettings())
    index = functools.partial(index_corpus, index_root=tmp_path / "corpora", embedder=embedder)
    corpus = CorpusSearch(SAMPLE / "external", index=index)
    kb = KnowledgeBase(tmp_path / "kb", embedder)
    kb.ingest([SAMPLE / "internal"])
    passages = {
        (row := json.loads(line))["id"]: "".join(row["text"].split())
        for line in (SAMPLE / "external" / "corpus.jsonl").read_text("utf-8").splitlines()
        if line.strip()
    }
    questions = [
        q
        for line in (SAMPLE / "questions.jsonl").read_text("utf-8").splitlines()
        if line.strip() and (q := json.loads(line))["expected_action"] in ("ambiguous", "incorrect")
    ]

    def found(results: list, gold: str, n: int) -> bool:
        return any("".join(r.content.split())[:60] in passages[gold] for r in results[:n])

    hits = {"verbatim": [0, 0], "keyword": [0, 0]}
    for q in questions:
        docs = [h.chunk.text for h in kb.search(q["question"], k=5)]
        for name, query in (
            ("verbatim", q["question"]),
            ("keyword", keyword_queries(Query.of(q["question"]), docs)[0]),
        ):
            results = corpus.search(query, k=5)
            hits[name][0] += found(results, q["gold_passage_id"], 1)
            hits[name][1] += found(results, q["gold_passage_id"], 5)
    print(f"\nrecall over {len(questions)} questions (top-1, top-5): {hits}")
    assert hits["keyword"][1] >= hits["verbatim"][1]
