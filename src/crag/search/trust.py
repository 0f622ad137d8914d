"""Trusted sources, recency and cross-source confirmation for external results.

The design article's third challenge: web results are noisy, stale or wrong. Three
answers, each a pure function:

* :func:`apply_trust` keeps allowed domains, drops denied ones, weights the rest and
  drops results older than a recency window (undated ones are kept, down-weighted);
* :func:`is_time_sensitive` spots questions ("最新", "this year", "2024") that need it;
* :func:`support_counts` counts how many independent domains state each fact, so facts
  carried by several sources rank above a single site's claim.

>>> from crag.types import WebResult
>>> rs = [WebResult("a", "https://spam.example/x", "..."), WebResult("b", "https://en.wikipedia.org/", "")]
>>> [r.title for r in apply_trust(rs, allow=[], deny=["spam.example"], weights={}, recency_days=None)]
['b']
"""

from __future__ import annotations

import email.utils
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import urlsplit

from crag.types import WebResult

UNDATED_FACTOR = 0.8  # an undated result may be stale: keep it, but below dated peers
TIME_SENSITIVE_DAYS = 365  # the article: "要求搜索返回最近一年的结果"
DUPLICATE_JACCARD = 0.5

_TIME_CUES = re.compile(
    r"最新|今年|本年|目前|现在|最近|近期|当前|今天|今日|如今"
    r"|\b(?:latest|newest|current|currently|this year|today|recent|recently|nowadays|right now|as of now"
    r"|up[- ]to[- ]date)\b"
    r"|(?<!\d)20[2-9]\d(?!\d)",
    re.IGNORECASE,
)


# ---------------------------------------------------------------- domains

_HOST = re.compile(r"[\w.:-]+")


def domain_of(url: str) -> str:
    """The lower-case host of ``url`` without ``www.`` (``""`` when there is none).

    >>> domain_of("https://WWW.Example.org:8443/a?b")
    'example.org'
    """
    try:
        host = urlsplit(url if "//" in url else f"//{url}").hostname or ""
    except ValueError:
        return ""
    host = host.rstrip(".").lower()
    if not _HOST.fullmatch(host):
        return ""  # "not a url" parses to a "host" with spaces
    return host[4:] if host.startswith("www.") else host


def _pattern(p: str) -> str:
    # Accept "example.org", "*.example.org", ".example.org" and full URLs alike.
    p = p.strip().lower()
    if "/" in p:
        p = domain_of(p)
    return p.lstrip("*").lstrip(".").rstrip(".")


def domain_matches(domain: str, pattern: str) -> bool:
    """True when ``domain`` is ``pattern`` or one of its subdomains.

    >>> domain_matches("zh.wikipedia.org", "wikipedia.org"), domain_matches("xwikipedia.org", "wikipedia.org")
    (True, False)
    """
    p = _pattern(pattern)
    return bool(p) and (domain == p or domain.endswith("." + p))


def _weight(domain: str, weights: Mapping[str, float]) -> float:
    # The most specific pattern wins: "blog.example.org" overrides "example.org".
    best, best_len = 1.0, -1
    for pattern, w in weights.items():
        p = _pattern(pattern)
        if domain_matches(domain, p) and len(p) > best_len:
            best, best_len = float(w), len(p)
    return best


# ---------------------------------------------------------------- dates

_AGO = re.compile(r"(\d+)\s*(minute|hour|day|week|month|year)s?\s+ago", re.IGNORECASE)
_AGO_ZH = re.compile(r"(\d+)\s*(分钟|小时|天|日|周|星期|个月|月|年)前")
_YMD = re.compile(r"(?<!\d)(\d{4})\s*[-/.年]\s*(\d{1,2})\s*[-/.月]\s*(\d{1,2})")
_UNIT_DAYS = {
    "minute": 1 / 1440,
    "hour": 1 / 24,
    "day": 1,
    "week": 7,
    "month": 30,
    "year": 365,
    "分钟": 1 / 1440,
    "小时": 1 / 24,
    "天": 1,
    "日": 1,
    "周": 7,
    "星期": 7,
    "个月": 30,
    "月": 30,
    "年": 365,
}
_FORMATS = ("%B %d, %Y", "%b %d, %Y", "%d %B %Y", "%d %b %Y", "%B %Y", "%b %Y")


def parse_published(text: str, now: datetime | None = None) -> datetime | None:
    """Parse the date forms providers use; ``None`` when there is no recognisable date.

    ISO 8601 (Tavily, SearXNG, Brave ``page_age``), RFC 2822, "March 5, 2024",
    "2024年5月18日" and relative ages ("3 days ago", "2天前"). Naive dates are UTC.

    >>> parse_published("2024-05-18T08:30:00Z").isoformat()
    '2024-05-18T08:30:00+00:00'
    """
    s = (text or "").strip()
    if not s:
        return None
    now = _aware(now or datetime.now(timezone.utc))
    iso = s[:-1] + "+00:00" if s.endswith(("Z", "z")) else s
    try:
        return _aware(datetime.fromisoformat(iso))
    except ValueError:
        pass
    m = _AGO.search(s) or _AGO_ZH.search(s)
    if m:
        return now - timedelta(days=int(m.group(1)) * _UNIT_DAYS[m.group(2).lower()])
    m = _YMD.search(s)
    if m:
        try:
            return datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), tzinfo=timezone.utc)
        except ValueError:
            return None
    try:
        return _aware(email.utils.parsedate_to_datetime(s))
    except (TypeError, ValueError, IndexError):
        pass
    for fmt in _FORMATS:
        try:
            return datetime.strptime(s, fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
    return None


def _aware(d: datetime) -> datetime:
    return d if d.tzinfo is not None else d.replace(tzinfo=timezone.utc)


# ---------------------------------------------------------------- policy


def apply_trust(
    results: Iterable[WebResult],
    *,
    allow: Sequence[str],
    deny: Sequence[str],
    weights: Mapping[str, float],
    recency_days: int | None,
    now: datetime | None = None,
) -> list[WebResult]:
    """Filter and re-weight ``results``; return copies sorted by their new score.

    * ``deny`` wins over ``allow``; an empty ``allow`` allows every domain; a pattern
      matches its subdomains (``wikipedia.org`` covers ``zh.wikipedia.org``).
    * The base score is the provider's, or, when it gave none, one derived from the
      rank (``1 - i / 2n``) so ordering survives; it is multiplied by the most specific
      matching weight.
    * With ``recency_days``, results dated before ``now - recency_days`` are dropped;
      undated ones are kept with their score times ``UNDATED_FACTOR``.
    """
    items = list(results)
    now = _aware(now or datetime.now(timezone.utc))
    cutoff = now - timedelta(days=recency_days) if recency_days is not None else None
    n = max(len(items), 1)
    kept: list[tuple[float, int, WebResult]] = []
    for i, r in enumerate(items):
        domain = domain_of(r.url)
        if any(domain_matches(domain, p) for p in deny):
            continue
        if allow and not any(domain_matches(domain, p) for p in allow):
            continue
        score = r.score if r.score is not None else 1.0 - i / (2 * n)
        score *= _weight(domain, weights)
        if cutoff is not None:
            when = parse_published(r.published, now)
            if when is None:
                score *= UNDATED_FACTOR
            elif when < cutoff:
                continue
        kept.append((score, i, replace(r, score=score)))
    kept.sort(key=lambda t: (-t[0], t[1]))  # stable on provider order for ties
    return [r for _, _, r in kept]


def is_time_sensitive(question: str) -> bool:
    """True when the question asks about the present ("最新", "this year", "2025"...).

    >>> is_time_sensitive("2024年诺贝尔物理学奖得主是谁"), is_time_sensitive("What is the capital of France?")
    (True, False)
    """
    return bool(_TIME_CUES.search(question or ""))


def effective_recency(recency_days: int | None, question: str) -> int | None:
    """The configured window, or one year for a time-sensitive question when none is set."""
    if recency_days is not None:
        return recency_days
    return TIME_SENSITIVE_DAYS if is_time_sensitive(question) else None


def apply_search_policy(
    results: Iterable[WebResult], settings: Any, *, question: str, now: datetime | None = None
) -> list[WebResult]:
    """:func:`apply_trust` with the ``search.*`` settings (a ``SearchSettings``) for ``question``."""
    return apply_trust(
        results,
        allow=settings.allow_domains,
        deny=settings.deny_domains,
        weights=settings.domain_weights,
        recency_days=effective_recency(settings.recency_days, question),
        now=now,
    )


# ---------------------------------------------------------------- cross-validation

_NORM = re.compile(r"[\W_]+", re.UNICODE)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CJK = re.compile(r"[\u4e00-\u9fff]+")
_CAPITAL = re.compile(r"\b[A-Z][\w-]{2,}")  # stops before "'s": "Eiffel's" is "Eiffel"
_STOP_CAPS = frozenset({"The", "This", "That", "There", "These", "Those", "What", "When", "Which", "And"})


def _trigrams(text: str) -> set[str]:
    s = _NORM.sub("", text.lower())
    return {s[i : i + 3] for i in range(len(s) - 2)} if len(s) >= 3 else ({s} if s else set())


def _facts(text: str) -> tuple[set[str], set[str]]:
    # Numbers of two or more digits (years, heights, counts) are the checkable part of a fact;
    # single digits are too common to mean anything. Entities: capitalised words, CJK bigrams.
    numbers = {n.replace(",", "") for n in _NUMBER.findall(text)}
    numbers = {n for n in numbers if len(n.replace(".", "")) >= 2}
    entities = {w.lower() for w in _CAPITAL.findall(text) if w not in _STOP_CAPS}
    for run in _CJK.findall(text):
        entities.update(run[i : i + 2] for i in range(len(run) - 1))
    return numbers, entities


def _same_fact(
    a: tuple[set[str], set[str], set[str]], b: tuple[set[str], set[str], set[str]], threshold: float
) -> bool:
    tri_a, num_a, ent_a = a
    tri_b, num_b, ent_b = b
    if tri_a and tri_b and len(tri_a & tri_b) / len(tri_a | tri_b) >= threshold:
        return True
    # Paraphrases share little surface text but state the same number about the same thing.
    return bool(num_a & num_b) and len(ent_a & ent_b) >= 2


def support_counts(strips: Sequence[tuple[str, str]], *, threshold: float = DUPLICATE_JACCARD) -> list[int]:
    """For each ``(text, domain)`` strip, how many distinct domains state the same fact.

    Two strips state the same fact when their character-trigram Jaccard similarity is at
    least ``threshold``, or when they share a number (two or more digits) and two entity
    tokens. A strip always supports itself, so every count is at least 1; copies on the
    same domain count once, so a site cannot vote for itself twice.

    >>> support_counts([
    ...     ("The Eiffel Tower is 330 metres tall.", "wikipedia.org"),
    ...     ("Standing 330 m, the Eiffel Tower is Paris's tallest structure.", "toureiffel.paris"),
    ...     ("The Louvre is the world's most-visited museum.", "louvre.fr"),
    ... ])
    [2, 2, 1]
    """
    feats = []
    for text, _ in strips:
        numbers, entities = _facts(text)
        feats.append((_trigrams(text), numbers, entities))
    counts: list[int] = []
    for i, (_, domain) in enumerate(strips):
        domains = {domain or f"#{i}"}
        for j, (_, other) in enumerate(strips):
            if j != i and _same_fact(feats[i], feats[j], threshold):
                domains.add(other or f"#{j}")
        counts.append(len(domains))
    return counts
