#!/usr/bin/env python3
"""Build ``data/hard/``: a bilingual benchmark that looks like real retrieval.

The shipped sample (``data/sample/``) is small and easy: every article is about something
different, so the right passage stands out. Real knowledge bases hold many passages about
*similar* things, and the answer is often only outside. This benchmark has that shape:

* **Hard negatives.** Chinese (CMRC 2018 dev): articles come in families with similar names
  (鑫诺一号/鑫诺二号通信卫星, 九龙巴士 7号线/86线, 大曲车站 (秋田县)/(青森县) …: same first two
  characters), and every article is cut into segments, so the same article's other segments
  compete too. English (SQuAD 2.0 dev half): 16 articles with ~40 paragraphs each, so every
  question has dozens of passages on the same subject that do not answer it.
* **Three locations of the gold passage**, so every CRAG action is needed: ``correct`` (gold
  passage in the internal KB), ``ambiguous`` (the article is partly internal, the gold passage
  only external) and ``incorrect`` (nothing of the article is internal; same-name articles may be).
* **Unanswerable questions** (``"answerable": false``, no gold answer anywhere): English from
  SQuAD 2.0's adversarial unanswerable questions, Chinese by removing the gold segment from both
  corpora while the rest of its article stays. The right reply is a refusal.

Deterministic (fixed seed, sorted inputs). Run from the repository root::

    python scripts/build_hard_data.py [--shared ../shared/data] [--out data/hard]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_sample_data import (  # the sample builder's loaders and filters
    EN_PRONOUNS,
    Article,
    Passage,
    Question,
    best,
    en_score,
    load_cmrc,
    load_squad,
    write_jsonl,
)

from crag.eval.metrics import gold_match  # the benchmark's own matching: "小巴 47M" is "小巴47M"

SEED = 20261130
PER_ACTION = 36  # answerable questions per language and expected action
UNANSWERABLE = 12  # per language
ZH_EXTRA_INTERNAL = 150  # unrelated articles added to the internal KB (noise)
ZH_EXTRA_EXTERNAL = 150  # and to the external corpus
EN_EXTERNAL_ONLY_ARTICLES = 5  # of the 16 SQuAD half-dev articles; the rest are partly internal
EN_INTERNAL_SHARE = 0.5  # share of a partly-internal article's paragraphs in the internal KB
ACTIONS = ("correct", "ambiguous", "incorrect")


# --------------------------------------------------------------------------- Chinese


def family_key(title: str) -> str:
    """Articles whose names start alike (鑫诺一号…/鑫诺二号…) form a family of same-name distractors."""
    core = re.sub(r"\s*[（(].*?[）)]\s*", "", title).strip()
    head = core[:2]
    return head if len(head) == 2 and all("\u4e00" <= c <= "\u9fff" for c in head) else ""


def build_zh(articles: list[Article], rng: random.Random) -> tuple[list[Passage], list[Passage], list[dict]]:
    articles = sorted(articles, key=lambda a: a.passages[0].source_id)
    families: dict[str, list[Article]] = defaultdict(list)
    for a in articles:
        if family_key(a.title):
            families[family_key(a.title)].append(a)
    in_family = {a.title for members in families.values() if len(members) > 1 for a in members}
    askable = [a for a in articles if a.questions]
    # Questions come from same-name families first (the hard case), then from the rest.
    fam = [a for a in askable if a.title in in_family]
    rest = [a for a in askable if a.title not in in_family]
    rng.shuffle(fam)
    rng.shuffle(rest)
    order = fam + rest

    role: dict[str, str] = {}  # article title -> correct | ambiguous | incorrect | unanswerable
    want = {"correct": PER_ACTION, "ambiguous": PER_ACTION, "incorrect": PER_ACTION, "unanswerable": UNANSWERABLE}
    spare = {k: int(v * 0.4) + 2 for k, v in want.items()}  # some questions fail the answer checks below
    taken = dict.fromkeys(want, 0)
    for a in order:
        multi = len(a.passages) >= 2
        for r in ("unanswerable", "ambiguous", "incorrect", "correct"):
            if taken[r] >= want[r] + spare[r] or (r in ("ambiguous", "unanswerable") and not multi):
                continue
            role[a.title] = r
            taken[r] += 1
            break

    internal: list[Passage] = []
    external: list[Passage] = []
    gold: dict[str, Passage] = {}  # title -> gold segment
    removed: set[str] = set()  # passage ids of unanswerable gold segments (in neither corpus)
    for a in articles:
        r = role.get(a.title)
        if r is None:
            continue
        seg = rng.choice(sorted(a.questions))
        g = next(p for p in a.passages if p.id == seg)
        gold[a.title] = g
        others = [p for p in a.passages if p is not g]
        if r == "correct":
            internal.append(g)
            for p in others:
                (internal if rng.random() < 0.5 else external).append(p)
        elif r == "ambiguous":
            external.append(g)
            internal.append(others[0])
            external.extend(others[1:])
        elif r == "incorrect":
            external.extend(a.passages)
        else:  # unanswerable: the article is there, the segment with the answer is nowhere
            removed.add(g.id)
            internal.append(others[0])
            external.extend(others[1:])
    # Same-name relatives that nobody asks about: mostly internal, where they mislead retrieval.
    for members in families.values():
        for a in members:
            if a.title not in role and len(members) > 1:
                (internal if rng.random() < 0.7 else external).extend(a.passages)
    used = set(role) | in_family
    noise = [a for a in articles if a.title not in used]
    rng.shuffle(noise)
    for a in noise[:ZH_EXTRA_INTERNAL]:
        internal.extend(a.passages)
    for a in noise[ZH_EXTRA_INTERNAL : ZH_EXTRA_INTERNAL + ZH_EXTRA_EXTERNAL]:
        external.extend(a.passages)

    internal_text = "\n".join(p.text for p in internal)
    all_text = internal_text + "\n" + "\n".join(p.text for p in external)
    rows: list[dict] = []
    count = dict.fromkeys(want, 0)
    for a in order:
        r = role.get(a.title)
        if r is None or count[r] >= want[r]:
            continue
        g = gold[a.title]
        for q in best(a.questions[g.id]):
            if r in ("ambiguous", "incorrect") and gold_match(internal_text, q.answers):
                continue  # the internal KB must really lack the answer
            if r == "unanswerable" and gold_match(all_text, q.answers):
                continue  # and for these, every corpus must
            rows.append(_record(q, r, a.title in in_family))
            count[r] += 1
            break
    _check_counts("zh", count, want)
    return internal, external, rows


# --------------------------------------------------------------------------- English


def load_unanswerable(folder: Path, pid_map: dict[str, Passage]) -> list[tuple[Passage, dict]]:
    """SQuAD 2.0's unanswerable questions that name their subject, with their paragraph."""
    out = []
    for line in (folder / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        p = pid_map.get(row["gold_pid"])
        q = row["question"].strip()
        if not row["is_impossible"] or p is None or not q.endswith("?") or not q[0].isupper():
            continue
        words = set(re.findall(r"[a-z']+", q.lower()))
        if EN_PRONOUNS & words or en_score(q, "x", p.title) < 3:
            continue
        out.append((p, row))
    return out


def build_en(
    articles: list[Article], folder: Path, rng: random.Random
) -> tuple[list[Passage], list[Passage], list[dict]]:
    titles = sorted(a.title for a in articles)
    external_only = set(rng.sample(titles, EN_EXTERNAL_ONLY_ARTICLES))
    internal: list[Passage] = []
    external: list[Passage] = []
    where: dict[str, str] = {}
    for a in sorted(articles, key=lambda a: a.title):
        for p in a.passages:
            inside = a.title not in external_only and rng.random() < EN_INTERNAL_SHARE
            (internal if inside else external).append(p)
            where[p.id] = "internal" if inside else "external"
    internal_text = "\n".join(p.text for p in internal)

    pools: dict[str, list[list[Question]]] = {r: [] for r in ACTIONS}
    for a in sorted(articles, key=lambda a: a.title):
        for pid, qs in sorted(a.questions.items()):
            if a.title in external_only:
                r = "incorrect"
            else:
                r = "correct" if where[pid] == "internal" else "ambiguous"
            if r != "correct":
                qs = [q for q in qs if not gold_match(internal_text, q.answers)]
            if qs:
                pools[r].append(best(qs))
    rows: list[dict] = []
    for r in ACTIONS:
        chosen = _round_robin(pools[r], PER_ACTION, rng)
        _check_counts("en", {r: len(chosen)}, {r: PER_ACTION})
        rows += [_record(q, r, False) for q in chosen]

    pid_map = {p.id.removeprefix("squad-"): p for a in articles for p in a.passages}
    cands = load_unanswerable(folder, {f"s2h-{k}": v for k, v in pid_map.items()})
    rng.shuffle(cands)
    seen: set[str] = set()
    for p, row in cands:
        if len([r for r in rows if r["expected_action"] == "unanswerable"]) >= UNANSWERABLE:
            break
        if p.id in seen:
            continue
        seen.add(p.id)
        q = Question(f"squad-{row['qid']}", row["question"].strip(), [], "en", p, 0.0)
        rows.append(_record(q, "unanswerable", False, location=where[p.id]))
    _check_counts(
        "en",
        {"unanswerable": sum(r["expected_action"] == "unanswerable" for r in rows)},
        {"unanswerable": UNANSWERABLE},
    )
    return internal, external, rows


def _round_robin(pools: list[list[Question]], n: int, rng: random.Random) -> list[Question]:
    """One question per passage first (best first), spread over passages in random order."""
    pools = [list(p) for p in pools]
    rng.shuffle(pools)
    out: list[Question] = []
    depth = 0
    while len(out) < n and any(len(p) > depth for p in pools):
        for p in pools:
            if len(out) < n and len(p) > depth:
                out.append(p[depth])
        depth += 1
    return out


# --------------------------------------------------------------------------- output


def _record(q: Question, action: str, same_name: bool, location: str | None = None) -> dict:
    answerable = action != "unanswerable"
    gold_location = {"correct": "internal", "ambiguous": "external", "incorrect": "external"}.get(action, "absent")
    row = {
        "id": q.source_id,
        "question": q.question,
        "answers": q.answers,
        "lang": q.lang,
        "expected_action": action,
        "gold_location": gold_location,
        "gold_passage_id": q.passage.id,
        "type": "factoid",
        "title": q.passage.title,
        "same_name_distractors": same_name,
    }
    if not answerable:
        row["answerable"] = False
        if location:
            row["passage_location"] = location
    return row


def _check_counts(lang: str, got: dict[str, int], want: dict[str, int]) -> None:
    short = {k: (got.get(k, 0), v) for k, v in want.items() if got.get(k, 0) < v}
    if short:
        raise SystemExit(f"{lang}: not enough questions for {short} (got, wanted); relax the filters")


def _passage_rows(passages: list[Passage]) -> list[dict]:
    seen: set[str] = set()
    out = []
    for p in sorted(passages, key=lambda p: p.id):
        if p.id not in seen:
            seen.add(p.id)
            out.append(p.record())
    return out


ATTRIBUTION = """\
# Attribution and licence of the hard benchmark

Everything in this folder is derived from two public data sets licensed under the **Creative Commons
Attribution-ShareAlike 4.0 International** licence (CC BY-SA 4.0, `../sample/LICENCE-CC-BY-SA-4.0.txt`),
and is shared under the same licence.

* **CMRC 2018** (Cui et al., "A Span-Extraction Dataset for Chinese Machine Reading Comprehension",
  EMNLP 2019), development set, from https://github.com/ymcui/cmrc2018 — passages from Chinese
  Wikipedia. Modifications: each article context is cut at sentence ends into segments; segments are
  divided between an internal knowledge base and an external corpus; some answer segments are removed.
* **SQuAD 2.0** (Rajpurkar, Jia and Liang, "Know What You Don't Know: Unanswerable Questions for
  SQuAD", ACL 2018), half of the development set — paragraphs from English Wikipedia. Modifications:
  paragraphs are divided between an internal knowledge base and an external corpus; answers are
  de-duplicated; unanswerable questions are kept with an empty answer list.

Questions and answers are copied verbatim. Built by `scripts/build_hard_data.py`.
"""


def main() -> int:
    root = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, default=root.parent / "shared" / "data")
    ap.add_argument("--out", type=Path, default=root / "data" / "hard")
    args = ap.parse_args()
    rng = random.Random(SEED)
    zh_int, zh_ext, zh_q = build_zh(load_cmrc(args.shared / "cmrc2018" / "cmrc2018_dev.squad_style.json"), rng)
    squad = args.shared / "squad2-dev-half"
    en_int, en_ext, en_q = build_en(load_squad(squad), squad, rng)
    if args.out.exists():
        shutil.rmtree(args.out)
    write_jsonl(args.out / "internal" / "zh.jsonl", _passage_rows(zh_int))
    write_jsonl(args.out / "internal" / "en.jsonl", _passage_rows(en_int))
    write_jsonl(args.out / "external" / "corpus.jsonl", _passage_rows(zh_ext + en_ext))
    write_jsonl(args.out / "questions.jsonl", zh_q + en_q)
    (args.out / "ATTRIBUTION.md").write_text(ATTRIBUTION, encoding="utf-8")
    n = defaultdict(int)
    for q in zh_q + en_q:
        n[(q["lang"], q["expected_action"])] += 1
    print(
        f"internal: {len(_passage_rows(zh_int))} zh + {len(_passage_rows(en_int))} en passages; "
        f"external: {len(_passage_rows(zh_ext + en_ext))}; questions: {dict(sorted(n.items()))}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
