#!/usr/bin/env python3
"""Build the bilingual sample data under ``data/sample/`` used by the demo, tests and benchmarks.

The output has the shape CRAG is meant for: a small, *incomplete* internal knowledge base and a
larger "external" corpus (a local stand-in for web search) that holds what the internal KB lacks.

Sources (both CC BY-SA 4.0, read from ``../shared/data`` or ``--shared PATH``):

* CMRC 2018 dev (Chinese Wikipedia, SQuAD v1 format). Each CMRC article is a single long
  context, so it is split into contiguous "paragraphs" at sentence ends (。！？…); an article's
  paragraphs are then divided between the internal KB and the external corpus.
* SQuAD 2.0 dev, one half (English Wikipedia): 16 articles with many paragraphs each. Only
  paragraphs of at most ``MAX_CHARS`` characters are used (none are trimmed).

Question kinds (``expected_action``):

* ``correct``   – the gold passage is in the internal KB;
* ``ambiguous`` – the article is partly in the internal KB, but the gold passage is external only;
* ``incorrect`` – no passage of the article is in the internal KB.

For ``ambiguous`` and ``incorrect`` questions no gold answer string occurs in any internal passage
of the same language, so the internal KB really cannot answer them.

The build is deterministic (fixed seed, sorted inputs). Run from the repository root::

    python scripts/build_sample_data.py [--shared PATH] [--out data/sample]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

SEED = 20240611
MAX_CHARS = 900  # hard upper bound for any passage
ZH_SEGMENT_TARGET = 250  # CMRC contexts are cut into pieces of roughly this size

# Internal-KB / external-corpus shape per language.
ZH_INTERNAL_ARTICLES = 13
ZH_INTERNAL_SEGMENTS_PER_ARTICLE = 2
ZH_EXTERNAL_ONLY_ARTICLES = 10
ZH_DISTRACTOR_ARTICLES = 14
EN_INTERNAL_ARTICLES = 10  # SQuAD half-dev has only 16 articles: 10 partly internal + 6 external only
EN_INTERNAL_PARAGRAPHS = (2, 3)  # per internal article, drawn at random
EN_EXTERNAL_PARAGRAPHS_PER_INTERNAL_ARTICLE = 4  # of the paragraphs the internal KB lacks
EN_EXTERNAL_ONLY_PARAGRAPHS = 5
EN_DISTRACTOR_PARAGRAPHS = 6
QUESTIONS_PER_ACTION = 20

# Hand-picked demo questions (source question ids), one per language x expected action.
DEMO_QUESTIONS: dict[tuple[str, str], str] = {
    ("zh", "correct"): "cmrc-DEV_574_QUERY_3",  # 天津犹太会堂是什么时候建成的？ -> 1940年
    ("zh", "ambiguous"): "cmrc-DEV_1171_QUERY_4",  # 庆大霉素是哪一年被发现的？ -> 1963年
    ("zh", "incorrect"): "cmrc-DEV_69_QUERY_0",  # 鑫诺一号通信卫星由什么公司制造？ -> 法国宇航公司
    ("en", "correct"): "squad-bdaa9703a5b4eff3cbe2cfbfb",  # Royal University of Warsaw -> 1816
    ("en", "ambiguous"): "squad-9da892eb0a23b31addffbda9d",  # What dynasty came after the Yuan?
    ("en", "incorrect"): "squad-5364454f2b76dcefc2bfd92fd",  # Newcomen's engine in a mine -> 1712
}

CMRC_COMMIT = "c0eb1b6b"
SQUAD_COMMIT = "85623ade"

ZH_PRONOUNS = ("他", "她", "它", "该", "此", "这", "那", "其")
EN_PRONOUNS = {"he", "she", "it", "they", "his", "her", "its", "their", "them", "him", "this", "these"}
_ZH_SENT = re.compile(r".*?(?:[。！？!?]+[」』”’）)]*|$)", re.S)


@dataclass
class Passage:
    id: str
    title: str
    text: str
    lang: str
    dataset: str
    source_id: str
    segment: int | None = None

    def record(self) -> dict:
        wiki = "zh" if self.lang == "zh" else "en"
        meta: dict = {"lang": self.lang, "dataset": self.dataset, "source_id": self.source_id}
        if self.segment is not None:
            meta["segment"] = self.segment
        return {
            "id": self.id,
            "title": self.title,
            "text": self.text,
            "url": f"https://{wiki}.wikipedia.org/wiki/{self.title.replace(' ', '_')}",
            "metadata": meta,
        }


@dataclass
class Question:
    source_id: str
    question: str
    answers: list[str]
    lang: str
    passage: Passage
    score: float = 0.0


@dataclass
class Article:
    title: str
    lang: str
    passages: list[Passage]
    questions: dict[str, list[Question]] = field(default_factory=dict)  # passage id -> questions


# --------------------------------------------------------------------------- loading


def split_zh(context: str, target: int | None = None) -> list[tuple[int, int]]:
    """Cut ``context`` into contiguous spans ending at sentence ends, each about ``target`` chars."""
    target = target or ZH_SEGMENT_TARGET
    sentences = [m.span() for m in _ZH_SENT.finditer(context) if m.end() > m.start()]
    n = max(1, round(len(context) / target))
    size = len(context) / n
    spans: list[tuple[int, int]] = []
    start = 0
    for _s, e in sentences:
        if e - start >= size * 0.8 or e == len(context):
            spans.append((start, e))
            start = e
    if start < len(context):
        spans.append((start, len(context)))
    # merge a too-short tail into the previous span
    if len(spans) > 1 and spans[-1][1] - spans[-1][0] < target * 0.35:
        spans[-2:] = [(spans[-2][0], spans[-1][1])]
    return spans


def clean_answers(raw: list[str], text: str, lang: str) -> list[str]:
    """Distinct short answer strings that occur verbatim in ``text``; the first one is the main answer.

    English answers must sit on word boundaries (drops annotation slips like "562 to 1598")."""
    out: list[str] = []
    for a in raw:
        a = a.strip().rstrip("。.，,；;")
        if not a or a in out or a not in text:
            continue
        if lang == "en":
            if len(a.split()) > 5 or len(a) > 40 or not re.search(rf"(?<!\w){re.escape(a)}(?!\w)", text):
                continue
        elif len(a) > 15:
            continue
        if out and not (a in out[0] or out[0] in a):
            continue  # keep only alternates that agree with the main answer
        out.append(a)
    return out[:3]


def zh_score(question: str, answer: str, title: str) -> float:
    core = re.sub(r"[（(].*?[）)]", "", title).strip()
    score = 0.0
    if core and core in question:
        score += 3
    else:
        return -1.0  # Chinese questions must name their subject
    if len(answer) <= 8:
        score += 1
    if any(p in question.replace(core, "") for p in ZH_PRONOUNS):
        score -= 1
    if any(w in question for w in ("为什么", "为何", "怎么", "如何", "怎样")):
        score -= 2
    return score


def load_cmrc(path: Path) -> list[Article]:
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    articles = []
    for art in data:
        title = (art.get("title") or "").strip()
        if not title:
            continue
        for para in art["paragraphs"]:
            ctx = para["context"]
            spans = split_zh(ctx)
            passages: list[Passage] = []
            bounds: list[tuple[int, int, Passage]] = []
            for s, e in spans:
                raw = ctx[s:e]
                lead = len(raw) - len(raw.lstrip())
                text = raw.strip()
                if not text:
                    continue
                seg = len(passages) + 1
                pid = f"cmrc-{para['id'].lower().replace('_', '')}-s{seg}"
                p = Passage(pid, title, text, "zh", "cmrc2018", para["id"], seg)
                passages.append(p)
                bounds.append((s + lead, s + lead + len(text), p))
            if any(len(p.text) > MAX_CHARS for p in passages):
                continue
            article = Article(title, "zh", passages)
            for qa in para["qas"]:
                first = qa["answers"][0]
                a0, a1 = first["answer_start"], first["answer_start"] + len(first["text"])
                home = next((p for s, e, p in bounds if s <= a0 and a1 <= e), None)
                if home is None:
                    continue
                answers = clean_answers([a["text"] for a in qa["answers"]], home.text, "zh")
                if not answers:
                    continue
                score = zh_score(qa["question"], answers[0], title)
                if score < 0:
                    continue
                q = Question(f"cmrc-{qa['id']}", qa["question"].strip(), answers, "zh", home, score)
                article.questions.setdefault(home.id, []).append(q)
            articles.append(article)
    return articles


def en_score(question: str, answer: str, title: str) -> float:
    words = re.findall(r"[A-Za-z']+", question.lower())
    title_words = {w.lower() for w in re.split(r"[_\s]+", title) if len(w) >= 4}
    score = 0.0
    if title_words & set(words) or title.replace("_", " ").lower() in question.lower():
        score += 2
    if any(w[0].isupper() for w in re.findall(r"\b[A-Za-z]+\b", question)[1:]):
        score += 1  # names something specific
    if EN_PRONOUNS & set(words):
        score -= 3
    if len(answer.split()) <= 3:
        score += 1
    if re.search(r"\b(feel|feeling|think|thought|happen|happened)\b", question.lower()):
        score -= 2
    if words and words[0] == "why":
        score -= 2
    return score


def load_squad(folder: Path) -> list[Article]:
    by_title: dict[str, list[Passage]] = defaultdict(list)
    pid_map: dict[str, Passage] = {}
    for line in (folder / "passages.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        text = row["text"].strip()
        if len(text) > MAX_CHARS:
            continue
        title = row["title"].replace("_", " ")
        p = Passage(f"squad-{row['pid'].removeprefix('s2h-')}", title, text, "en", "squad2.0", row["pid"])
        by_title[title].append(p)
        pid_map[row["pid"]] = p
    articles = {t: Article(t, "en", ps) for t, ps in by_title.items()}
    for line in (folder / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["is_impossible"] or row["gold_pid"] not in pid_map:
            continue
        p = pid_map[row["gold_pid"]]
        answers = clean_answers(row["answers"], p.text, "en")
        question = row["question"].strip()
        if not answers or not question.endswith("?") or not question[0].isupper():
            continue
        score = en_score(question, answers[0], p.title)
        if score < 3:
            continue
        q = Question(f"squad-{row['qid']}", question, answers, "en", p, score)
        articles[p.title].questions.setdefault(p.id, []).append(q)
    return [articles[t] for t in sorted(articles)]


# --------------------------------------------------------------------------- selection


def best(questions: list[Question]) -> list[Question]:
    return sorted(questions, key=lambda q: (-q.score, len(q.answers[0]), q.source_id))


def pick_questions(
    pools: list[list[Question]], n: int, blocked: set[str], rng: random.Random, per_pool: int = 2
) -> list[Question]:
    """Round-robin over ``pools`` (one per passage), best question first, skipping answers that
    occur in ``blocked`` texts."""

    def ok(q: Question) -> bool:
        return not any(a in t for a in q.answers for t in blocked)

    pools = [[q for q in best(pool) if ok(q)] for pool in pools]
    pools = [p for p in pools if p]
    rng.shuffle(pools)
    chosen: list[Question] = []
    for rnd in range(per_pool):
        for pool in pools:
            if len(chosen) >= n:
                return chosen
            if rnd < len(pool):
                chosen.append(pool[rnd])
    return chosen


@dataclass
class LangSplit:
    internal: list[Passage]
    external: list[Passage]
    questions: dict[str, list[Question]]  # action -> questions


def build_zh(articles: list[Article], rng: random.Random) -> LangSplit:
    articles = sorted(articles, key=lambda a: a.passages[0].source_id)
    # internal articles: >= 3 segments, questions on >= 2 of them
    cand_int = [
        a
        for a in articles
        if len(a.passages) >= 3 and len(a.questions) >= 2 and sum(len(v) for v in a.questions.values()) >= 3
    ]
    internal_arts = rng.sample(cand_int, ZH_INTERNAL_ARTICLES)
    used = {a.title for a in internal_arts}
    cand_ext = [
        a
        for a in articles
        if a.title not in used and sum(len(v) for v in a.questions.values()) >= 3 and len(a.passages) >= 2
    ]
    ext_only = rng.sample(cand_ext, ZH_EXTERNAL_ONLY_ARTICLES)
    used |= {a.title for a in ext_only}
    cand_dis = [a for a in articles if a.title not in used]
    distractors = rng.sample(cand_dis, ZH_DISTRACTOR_ARTICLES)

    internal: list[Passage] = []
    external: list[Passage] = []
    amb_pools: list[list[Question]] = []
    cor_pools: list[list[Question]] = []
    for art in internal_arts:
        # one segment with questions goes internal, at least one other one stays external
        with_q = [p for p in art.passages if p.id in art.questions]
        rng.shuffle(with_q)
        keep = [with_q[0]]
        others = [p for p in art.passages if p not in keep and p is not with_q[-1]]
        plain = [p for p in others if p.id not in art.questions]  # prefer ones without questions
        keep += rng.sample(plain or others, ZH_INTERNAL_SEGMENTS_PER_ARTICLE - 1)
        for p in art.passages:
            (internal if p in keep else external).append(p)
            (cor_pools if p in keep else amb_pools).append(art.questions.get(p.id, []))
    inc_pools = []
    for art in ext_only:
        external.extend(art.passages)
        inc_pools.extend(art.questions.values())
    for art in distractors:
        external.extend(art.passages)
    return _finish(internal, external, cor_pools, amb_pools, inc_pools, rng)


def build_en(articles: list[Article], rng: random.Random) -> LangSplit:
    rich = [a for a in articles if len(a.questions) >= 6]
    internal_arts = sorted(rng.sample(rich, EN_INTERNAL_ARTICLES), key=lambda a: a.title)
    ext_only = [a for a in articles if a not in internal_arts]
    internal: list[Passage] = []
    external: list[Passage] = []
    spare: list[Passage] = []
    cor_pools: list[list[Question]] = []
    amb_pools: list[list[Question]] = []
    inc_pools: list[list[Question]] = []
    for art in internal_arts:
        with_q = [p for p in art.passages if p.id in art.questions]
        rng.shuffle(with_q)
        k = rng.randint(*EN_INTERNAL_PARAGRAPHS)
        keep, rest = with_q[:k], with_q[k : k + EN_EXTERNAL_PARAGRAPHS_PER_INTERNAL_ARTICLE]
        internal.extend(sorted(keep, key=lambda p: p.id))
        external.extend(sorted(rest, key=lambda p: p.id))
        cor_pools.extend(art.questions[p.id] for p in keep)
        amb_pools.extend(art.questions[p.id] for p in rest)
        spare.extend(p for p in art.passages if p not in keep and p not in rest)
    for art in ext_only:
        with_q = [p for p in art.passages if p.id in art.questions]
        rest = sorted(rng.sample(with_q, min(EN_EXTERNAL_ONLY_PARAGRAPHS, len(with_q))), key=lambda p: p.id)
        external.extend(rest)
        inc_pools.extend(art.questions[p.id] for p in rest)
        spare.extend(p for p in art.passages if p not in rest)
    # distractors: more paragraphs of the same articles, never used as gold
    external.extend(sorted(rng.sample(spare, EN_DISTRACTOR_PARAGRAPHS), key=lambda p: p.id))
    return _finish(internal, external, cor_pools, amb_pools, inc_pools, rng)


def _finish(internal, external, cor_pools, amb_pools, inc_pools, rng) -> LangSplit:
    internal_texts = {p.text for p in internal}
    external = [p for p in external if p.text not in internal_texts]
    qs = {
        "correct": pick_questions(cor_pools, QUESTIONS_PER_ACTION, set(), rng),
        "ambiguous": pick_questions(amb_pools, QUESTIONS_PER_ACTION, internal_texts, rng, per_pool=3),
        "incorrect": pick_questions(inc_pools, QUESTIONS_PER_ACTION, internal_texts, rng, per_pool=3),
    }
    return LangSplit(internal, external, qs)


# --------------------------------------------------------------------------- output


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def question_record(q: Question, action: str) -> dict:
    return {
        "id": q.source_id,
        "question": q.question,
        "answers": q.answers,
        "lang": q.lang,
        "expected_action": action,
        "gold_location": "internal" if action == "correct" else "external",
        "gold_passage_id": q.passage.id,
        "type": "factoid",
        "title": q.passage.title,
    }


ATTRIBUTION = """\
# Attribution and licence of the sample data

The files in this folder (`internal/zh.jsonl`, `internal/en.jsonl`, `external/corpus.jsonl`,
`questions.jsonl`, `demo_questions.jsonl`) are derived from two public data sets, both licensed
under the **Creative Commons Attribution-ShareAlike 4.0 International** licence (CC BY-SA 4.0).
The full licence text is in [`LICENCE-CC-BY-SA-4.0.txt`](LICENCE-CC-BY-SA-4.0.txt).

## Sources

* **Chinese passages and questions**: CMRC 2018 — Yiming Cui et al., "A Span-Extraction Dataset
  for Chinese Machine Reading Comprehension" (EMNLP 2019). Dev set in SQuAD format from
  https://github.com/ymcui/cmrc2018, file `squad-style-data/cmrc2018_dev.json` at commit
  `{cmrc}`. Licence: CC BY-SA 4.0.
* **English passages and questions**: SQuAD 2.0 — Pranav Rajpurkar, Robin Jia and Percy Liang,
  "Know What You Don't Know: Unanswerable Questions for SQuAD" (ACL 2018). One half of the
  official dev set, taken from https://github.com/chrischute/squad, file `data/dev-v2.0.json` at
  commit `{squad}`. Licence of the data: CC BY-SA 4.0 (the MIT licence of that repository covers
  its code only).

Both data sets consist of text from Wikipedia (Chinese and English Wikipedia respectively),
itself available under CC BY-SA; the `url` fields point to the Wikipedia article of the same
title and are given for attribution and as pseudo web addresses, they were not fetched and the
current articles may differ.

## Modifications

These files are an adaptation of the sources, made by `scripts/build_sample_data.py`:

* **Selection**: a small, fixed (seeded) subset of articles, paragraphs and questions was chosen;
  questions without an answer (SQuAD 2.0 "impossible" questions), with long answers, or that do
  not name their subject were left out.
* **Splitting**: each CMRC 2018 article (a single long context) was split at sentence ends into
  consecutive paragraphs of roughly {seg} characters; the text itself is unchanged.
* **Trimming**: none of the passage texts was shortened or edited; SQuAD paragraphs longer than
  {maxc} characters were simply not selected. Leading and trailing whitespace was removed.
* **Re-arrangement**: the chosen paragraphs were divided between a small "internal" knowledge base
  and an "external" corpus, deliberately leaving parts of articles (and whole articles) out of the
  internal knowledge base; answer strings were de-duplicated, stripped of trailing punctuation
  and limited to short variants of the first answer, and labels (`expected_action`,
  `gold_location`, `gold_passage_id`) and new identifiers were added.

## Licence of the derived files

The derived files in this folder are shared under the same licence, **CC BY-SA 4.0**
(https://creativecommons.org/licenses/by-sa/4.0/). You may copy, adapt and redistribute them,
including commercially, provided you give appropriate credit to the original authors (CMRC 2018,
SQuAD 2.0, Wikipedia contributors), indicate changes, and share your adaptations under the same
licence. There is no warranty. This licence applies to the data only; the `crag` source code is
under its own licence.
"""


def main(argv: list[str] | None = None) -> int:
    repo = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", type=Path, default=repo.parent / "shared" / "data")
    ap.add_argument("--out", type=Path, default=repo / "data" / "sample")
    args = ap.parse_args(argv)
    shared: Path = args.shared
    out: Path = args.out

    cmrc_dir = shared / "cmrc2018"
    cmrc_file = next(
        (cmrc_dir / n for n in ("cmrc2018_dev.json", "cmrc2018_dev.squad_style.json") if (cmrc_dir / n).exists()),
        None,
    )
    if cmrc_file is None:
        print(f"CMRC 2018 dev file not found in {cmrc_dir}", file=sys.stderr)
        return 1

    rng = random.Random(SEED)
    zh = build_zh(load_cmrc(cmrc_file), random.Random(rng.random()))
    en = build_en(load_squad(shared / "squad2-dev-half"), random.Random(rng.random()))

    write_jsonl(out / "internal" / "zh.jsonl", [p.record() for p in zh.internal])
    write_jsonl(out / "internal" / "en.jsonl", [p.record() for p in en.internal])
    write_jsonl(out / "external" / "corpus.jsonl", [p.record() for p in zh.external + en.external])

    questions: list[dict] = []
    for split in (zh, en):
        for action in ("correct", "ambiguous", "incorrect"):
            chosen = sorted(split.questions[action], key=lambda q: q.source_id)
            questions.extend(question_record(q, action) for q in chosen)
    write_jsonl(out / "questions.jsonl", questions)

    by_id = {q["id"]: q for q in questions}
    demo = []
    for (lang, action), qid in DEMO_QUESTIONS.items():
        q = by_id.get(qid)
        if q is None or q["lang"] != lang or q["expected_action"] != action:
            print(f"demo question {qid!r} is not among the {lang}/{action} questions", file=sys.stderr)
            return 1
        demo.append(q)
    write_jsonl(out / "demo_questions.jsonl", demo)

    (out / "ATTRIBUTION.md").write_text(
        ATTRIBUTION.format(cmrc=CMRC_COMMIT, squad=SQUAD_COMMIT, seg=ZH_SEGMENT_TARGET, maxc=MAX_CHARS),
        encoding="utf-8",
    )
    shutil.copyfile(cmrc_dir / "LICENCE", out / "LICENCE-CC-BY-SA-4.0.txt")

    print(f"internal: zh={len(zh.internal)} en={len(en.internal)}")
    print(f"external: zh={len(zh.external)} en={len(en.external)} total={len(zh.external) + len(en.external)}")
    for lang, split in (("zh", zh), ("en", en)):
        print(lang, {a: len(v) for a, v in split.questions.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
