"""Trusted sources, recency windows, time-sensitive questions and cross-source support."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from crag.config import CragSettings
from crag.search.trust import (
    UNDATED_FACTOR,
    apply_search_policy,
    apply_trust,
    domain_matches,
    domain_of,
    is_time_sensitive,
    parse_published,
    support_counts,
)
from crag.types import WebResult

pytestmark = pytest.mark.unit

NOW = datetime(2025, 6, 1, tzinfo=timezone.utc)


def r(url: str, score: float | None = 1.0, published: str = "", title: str = "") -> WebResult:
    return WebResult(title=title or url, url=url, content="c", published=published, score=score)


def trust(results: list[WebResult], **kw: object) -> list[WebResult]:
    args: dict[str, object] = {"allow": [], "deny": [], "weights": {}, "recency_days": None, "now": NOW}
    args.update(kw)
    return apply_trust(results, **args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "domain"),
    [
        ("https://www.Example.org/a", "example.org"),
        ("http://zh.wikipedia.org:443/wiki/x", "zh.wikipedia.org"),
        ("example.com/path", "example.com"),
        ("https://[::1]/", "::1"),
        ("not a url", ""),
        ("", ""),
    ],
)
def test_domain_of(url: str, domain: str) -> None:
    assert domain_of(url) == domain


@pytest.mark.parametrize(
    ("domain", "pattern", "ok"),
    [
        ("wikipedia.org", "wikipedia.org", True),
        ("zh.wikipedia.org", "wikipedia.org", True),
        ("zh.wikipedia.org", "*.wikipedia.org", True),
        ("zh.wikipedia.org", "https://en.wikipedia.org/wiki/X", False),
        ("evilwikipedia.org", "wikipedia.org", False),
        ("wikipedia.org.evil.com", "wikipedia.org", False),
        ("example.org", "", False),
    ],
)
def test_domain_matches(domain: str, pattern: str, ok: bool) -> None:
    assert domain_matches(domain, pattern) is ok


def test_empty_allow_keeps_everything_and_deny_wins() -> None:
    rs = [r("https://en.wikipedia.org/a"), r("https://spam.example/b"), r("https://gov.cn/c")]
    assert [x.url for x in trust(rs)] == [x.url for x in rs]
    kept = trust(rs, allow=["wikipedia.org", "spam.example"], deny=["spam.example"])
    assert [x.url for x in kept] == ["https://en.wikipedia.org/a"]
    assert [x.url for x in trust(rs, deny=["ample"])] == [rs[0].url, rs[1].url, rs[2].url]  # no partial match


def test_subdomain_of_denied_domain_is_denied() -> None:
    rs = [r("https://cdn.ads.example.com/x"), r("https://example.com/y")]
    assert [x.url for x in trust(rs, deny=["ads.example.com"])] == ["https://example.com/y"]


def test_weights_multiply_and_reorder() -> None:
    rs = [
        r("https://blog.example.com/a", 0.9),
        r("https://en.wikipedia.org/b", 0.6),
        r("https://x.org/c", 0.5),
    ]
    out = trust(rs, weights={"wikipedia.org": 2.0, "example.com": 0.5, "blog.example.com": 0.1})
    assert [x.url for x in out] == [
        "https://en.wikipedia.org/b",
        "https://x.org/c",
        "https://blog.example.com/a",
    ]
    assert out[0].score == pytest.approx(1.2)
    assert out[2].score == pytest.approx(0.09)  # the most specific pattern wins
    assert rs[0].score == 0.9  # inputs are not modified


def test_missing_scores_keep_provider_order() -> None:
    rs = [r(f"https://s{i}.org/", None) for i in range(4)]
    out = trust(rs)
    assert [x.url for x in out] == [x.url for x in rs]
    assert all(x.score is not None for x in out)
    assert out[0].score > out[-1].score  # type: ignore[operator]


def test_recency_drops_old_keeps_undated_down_weighted() -> None:
    rs = [
        r("https://old.org/", 1.0, "2019-03-01T00:00:00Z"),
        r("https://new.org/", 1.0, "2025-05-20"),
        r("https://undated.org/", 1.0, ""),
        r("https://garbled.org/", 1.0, "sometime"),
        r("https://relative.org/", 1.0, "3 days ago"),
        r("https://zh.org/", 1.0, "2025年5月18日"),
    ]
    out = {x.url: x.score for x in trust(rs, recency_days=90)}
    assert "https://old.org/" not in out
    assert out["https://new.org/"] == pytest.approx(1.0)
    assert out["https://relative.org/"] == pytest.approx(1.0)
    assert out["https://zh.org/"] == pytest.approx(1.0)
    assert out["https://undated.org/"] == pytest.approx(UNDATED_FACTOR)
    assert out["https://garbled.org/"] == pytest.approx(UNDATED_FACTOR)
    # without a window nothing is dropped or penalised
    assert len(trust(rs)) == len(rs) and all(x.score == 1.0 for x in trust(rs))


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("2024-05-18T08:30:00Z", "2024-05-18T08:30:00+00:00"),
        ("2024-05-18T08:30:00+08:00", "2024-05-18T08:30:00+08:00"),
        ("2024-05-18", "2024-05-18T00:00:00+00:00"),
        ("March 5, 2024", "2024-03-05T00:00:00+00:00"),
        ("5 Mar 2024", "2024-03-05T00:00:00+00:00"),
        ("Tue, 05 Mar 2024 10:00:00 GMT", "2024-03-05T10:00:00+00:00"),
        ("2024年3月5日", "2024-03-05T00:00:00+00:00"),
        ("2024/3/5", "2024-03-05T00:00:00+00:00"),
        ("2 days ago", "2025-05-30T00:00:00+00:00"),
        ("1 week ago", "2025-05-25T00:00:00+00:00"),
        ("3天前", "2025-05-29T00:00:00+00:00"),
    ],
)
def test_parse_published(text: str, iso: str) -> None:
    parsed = parse_published(text, NOW)
    assert parsed is not None and parsed.isoformat() == iso


@pytest.mark.parametrize("text", ["", "   ", "yesterday-ish", "2024-13-45", None])
def test_parse_published_unknown(text: str | None) -> None:
    assert parse_published(text, NOW) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "question",
    [
        "最新的Python版本是多少？",
        "今年的诺贝尔文学奖得主是谁",
        "目前中国的人口有多少",
        "现在美国总统是谁",
        "最近有什么AI新闻",
        "What is the latest version of Python?",
        "Who is the current CEO of OpenAI?",
        "What happened this year in AI?",
        "What's the weather today?",
        "recent advances in RAG",
        "Who won the 2024 election?",
        "2025年GDP增长率",
    ],
)
def test_time_sensitive(question: str) -> None:
    assert is_time_sensitive(question)


@pytest.mark.parametrize(
    "question",
    [
        "中国的首都是哪里",
        "When was the Eiffel Tower completed?",
        "What is the boiling point of water?",
        "Who wrote Hamlet in 1600?",
        "What is 12024 divided by 4?",
        "",
    ],
)
def test_not_time_sensitive(question: str) -> None:
    assert not is_time_sensitive(question)


def test_search_policy_uses_settings_and_question() -> None:
    s = CragSettings(search={"deny_domains": ["spam.example"], "domain_weights": {"gov.cn": 3.0}}).search
    rs = [
        r("https://spam.example/", 1.0, "2025-05-01"),
        r("https://old.org/", 1.0, "2020-01-01"),
        r("https://www.gov.cn/", 0.5, "2025-05-01"),
    ]
    # timeless question: no window, old result kept
    assert [x.url for x in apply_search_policy(rs, s, question="中国的首都是哪里", now=NOW)] == [
        "https://www.gov.cn/",
        "https://old.org/",
    ]
    # time-sensitive question: the one-year default window drops the 2020 page
    assert [x.url for x in apply_search_policy(rs, s, question="目前中国的首都是哪里", now=NOW)] == [
        "https://www.gov.cn/"
    ]
    # an explicit window applies to every question
    s2 = CragSettings(search={"recency_days": 3650}).search
    assert len(apply_search_policy(rs, s2, question="最新消息", now=NOW)) == 3


def test_support_counts_cross_domain_confirmation() -> None:
    strips = [
        ("The Eiffel Tower was completed on 31 March 1889.", "en.wikipedia.org"),
        ("The Eiffel Tower was completed on 31 March 1889!", "britannica.com"),  # near copy
        ("The Eiffel Tower was completed on 31 March 1889.", "en.wikipedia.org"),  # same domain again
        ("Eiffel Tower height: 330 metres, says the official site.", "travel.example"),
        ("Gustave Eiffel's Tower stands 330 metres tall.", "toureiffel.paris"),  # same number + entities
        ("The Louvre is the most-visited museum in the world.", "louvre.fr"),
    ]
    # wikipedia's duplicate adds no vote; the paraphrases confirm each other, not the date
    assert support_counts(strips) == [2, 2, 2, 2, 2, 1]
    # the Jaccard threshold decides how close surface text must be
    pair = [
        ("Paris is the capital and largest city of France.", "a.org"),
        ("Paris is the capital of France.", "b.org"),
    ]
    assert support_counts(pair) == [2, 2]
    assert support_counts(pair, threshold=0.9) == [1, 1]


def test_support_counts_chinese_and_edge_cases() -> None:
    strips = [
        ("北京是中华人民共和国的首都，人口约2189万。", "gov.cn"),
        ("中华人民共和国的首都是北京，常住人口约2189万人。", "xinhuanet.com"),
        ("上海是中国的经济中心。", "sh.gov.cn"),
    ]
    assert support_counts(strips) == [2, 2, 1]
    assert support_counts([]) == []
    assert support_counts([("", ""), ("", "")]) == [1, 1]  # empty domains are separate sources


def test_support_counts_numbers_alone_do_not_confirm() -> None:
    strips = [("The tower is 330 metres tall.", "a.org"), ("Route 330 runs through Ohio.", "b.org")]
    assert support_counts(strips) == [1, 1]
