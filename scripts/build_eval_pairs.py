"""Build labelled (query, passage) pairs for training and testing the ``trained`` evaluator.

Sources (both CC BY-SA 4.0, see ``data/eval_pairs/ATTRIBUTION.md``):

- Chinese: CMRC 2018 dev (``/work/shared/data/cmrc2018``)
- English: SQuAD 2.0, half of dev (``/work/shared/data/squad2-dev-half``)

Each paragraph is cut into fixed windows of whole sentences (~400 characters for English,
~300 for Chinese, whose characters cost the embedder about four times as much). Pairs:

- positive (1): a question with the window of its paragraph that holds the answer
- hard (0): another window of the same paragraph, or a window of another paragraph of the
  same article, without the answer; SQuAD's unanswerable questions with their own passage
- medium (0): a window of another article sharing keywords with the question
- easy (0): a random window of another article

Train and test are split by article title (~20% test), so no text of a test article is
seen in training. Negatives come only from windows of the same split. Deterministic.

The questions of the answer benchmark ``data/hard`` come from the same two sets, so they
are held out of training (``--exclude``): an evaluator that had learnt those very
(question, passage) pairs would route that benchmark better than it routes unseen
questions. Their paragraphs can still appear with other questions (English has only 16
articles, all of them in ``data/hard``), which the model card states.

Usage: ``python scripts/build_eval_pairs.py [--out data/eval_pairs] [--seed 13]``
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from crag.text import split_sentences, tokenize

DATA = Path("/work/shared/data")
HELD_OUT = Path(__file__).resolve().parents[1] / "data" / "hard" / "questions.jsonl"
CMRC = DATA / "cmrc2018" / "cmrc2018_dev.squad_style.json"
SQUAD_P = DATA / "squad2-dev-half" / "passages.jsonl"
SQUAD_Q = DATA / "squad2-dev-half" / "questions.jsonl"

WINDOW = {"zh": 300, "en": 400}
# Embedding is the cost (Chinese ~0.15 s per 300-char window on this machine), so only a
# sample of paragraphs is used; every window of a chosen paragraph is embedded once.
PARAGRAPHS = {"zh": 460, "en": 646}  # en: all of the half dev set
TEST_SHARE = 0.2


@dataclass
class Window:
    key: str  # "<pid>#<i>"
    pid: str
    title: str
    start: int
    end: int
    text: str
    tokens: frozenset[str] = field(default_factory=frozenset)


@dataclass
class Question:
    qid: str
    text: str
    pid: str
    title: str
    answers: list[tuple[str, int]]  # (answer text, start offset); empty when unanswerable
    impossible: bool = False
    plausible: list[tuple[str, int]] = field(default_factory=list)


def windows_of(pid: str, title: str, text: str, size: int) -> list[Window]:
    """Greedy sentence packing into windows of at most ``size`` chars (long sentences cut)."""
    spans: list[tuple[int, int]] = []
    cur = 0
    for s in split_sentences(text):
        i = text.find(s, cur)
        if i < 0:
            continue
        j = i + len(s)
        while j - i > size * 1.5:  # a run-on sentence: hard cut
            spans.append((i, i + size))
            i += size
        spans.append((i, j))
        cur = j
    out: list[tuple[int, int]] = []
    for a, b in spans:
        if out and (b - out[-1][0] <= size or (b - a < size // 5 and b - out[-1][0] <= 1.3 * size)):
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return [Window(f"{pid}#{k}", pid, title, a, b, text[a:b]) for k, (a, b) in enumerate(out)]


def load_cmrc() -> tuple[dict[str, str], dict[str, str], list[Question]]:
    raw = json.loads(CMRC.read_text(encoding="utf-8"))
    paras: dict[str, str] = {}
    titles: dict[str, str] = {}
    qs: list[Question] = []
    for art in raw["data"]:
        for para in art["paragraphs"]:
            pid = para["id"]
            ctx = para["context"]
            paras[pid], titles[pid] = ctx, art["title"]
            for qa in para["qas"]:
                ans = []
                for a in qa["answers"]:
                    st = a["answer_start"]
                    if ctx[st : st + len(a["text"])] != a["text"]:  # a few offsets are off
                        st = ctx.find(a["text"])
                    if st >= 0 and a["text"]:
                        ans.append((a["text"], st))
                if ans:
                    qs.append(Question(qa["id"], qa["question"], pid, art["title"], ans))
    return paras, titles, qs


def load_squad() -> tuple[dict[str, str], dict[str, str], list[Question]]:
    paras: dict[str, str] = {}
    titles: dict[str, str] = {}
    for line in SQUAD_P.read_text(encoding="utf-8").splitlines():
        p = json.loads(line)
        paras[p["pid"]], titles[p["pid"]] = p["text"], p["title"]
    qs: list[Question] = []
    for line in SQUAD_Q.read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        pid = q["gold_pid"]
        ctx = paras[pid]
        if q["is_impossible"]:
            pl = [(a, ctx.find(a)) for a in q.get("plausible_answers") or [] if a and ctx.find(a) >= 0]
            qs.append(Question(q["qid"], q["question"], pid, titles[pid], [], True, pl))
            continue
        spans = zip(q["all_answers"], q["answer_starts"], strict=True)
        ans = [(a, s) for a, s in spans if ctx[s : s + len(a)] == a]
        if ans:
            qs.append(Question(q["qid"], q["question"], pid, titles[pid], ans))
    return paras, titles, qs


def split_titles(titles: list[str], weights: Counter[str], rng: random.Random) -> set[str]:
    """Pick test titles (in seeded random order) until they hold ~TEST_SHARE of the weight."""
    order = sorted(titles)
    rng.shuffle(order)
    total = sum(weights[t] for t in order)
    test: set[str] = set()
    acc = 0
    for t in order:
        if acc >= TEST_SHARE * total:
            break
        if acc + weights[t] > 1.6 * TEST_SHARE * total:  # skip a title that would overshoot
            continue
        test.add(t)
        acc += weights[t]
    return test


def contains_answer(w: Window, q: Question) -> bool:
    low = w.text.lower()
    return any(a.lower() in low for a, _ in q.answers + q.plausible)


def build(lang: str, rng: random.Random) -> dict[str, list[dict[str, object]]]:
    paras, titles, qs = load_cmrc() if lang == "zh" else load_squad()
    source = "cmrc2018" if lang == "zh" else "squad2"
    pids = sorted(p for p in paras if any(q.pid == p for q in qs))
    rng.shuffle(pids)
    pids = sorted(pids[: PARAGRAPHS[lang]])
    chosen = set(pids)
    wins: dict[str, list[Window]] = {p: windows_of(p, titles[p], paras[p], WINDOW[lang]) for p in pids}
    for ws in wins.values():
        for w in ws:
            w.tokens = frozenset(t for t in tokenize(w.text) if len(t) > 1)
    test_titles = split_titles(sorted({titles[p] for p in pids}), Counter(titles[p] for p in pids), rng)
    out: dict[str, list[dict[str, object]]] = {"train": [], "test": []}
    for split in ("train", "test"):
        in_split = [p for p in pids if (titles[p] in test_titles) == (split == "test")]
        pool = [w for p in in_split for w in wins[p]]
        by_title: dict[str, list[Window]] = defaultdict(list)
        for w in pool:
            by_title[w.title].append(w)
        rows = out[split]
        for q in (q for q in qs if q.pid in chosen and q.pid in in_split):
            _pairs_for(q, wins[q.pid], by_title, pool, rng, rows, lang, source)
    return out


def _pairs_for(
    q: Question,
    own: list[Window],
    by_title: dict[str, list[Window]],
    pool: list[Window],
    rng: random.Random,
    rows: list[dict[str, object]],
    lang: str,
    source: str,
) -> None:
    def add(w: Window, label: int, kind: str) -> None:
        rows.append(
            {
                "query": q.text,
                "passage": w.text,
                "label": label,
                "lang": lang,
                "source": source,
                "kind": kind,
                "qid": q.qid,
                "title": q.title,
                "window": w.key,
            }
        )

    if q.impossible:
        # Only a share of them, so positives stay ~40%; the window with the plausible
        # (wrong) answer is the most convincing distractor.
        if rng.random() < 0.45:
            hits = [w for w in own if any(w.start <= s < w.end for _, s in q.plausible)]
            add(rng.choice(hits or own), 0, "unanswerable")
        return
    a, s = q.answers[0]
    pos = [w for w in own if w.start <= s and s + len(a) <= w.end]
    if not pos:
        return
    add(pos[0], 1, "positive")
    n_neg = 1 if lang == "en" else rng.choice((1, 2))
    used: set[str] = {pos[0].key}
    for _ in range(n_neg):
        r = rng.random()
        cands: list[Window] = []
        kind = "easy"
        if r < 0.5:
            kind = "hard"
            cands = [w for w in by_title[q.title] if w.key not in used and not contains_answer(w, q)]
            same_para = [w for w in cands if w.pid == q.pid]
            if same_para and rng.random() < 0.6:
                cands = same_para
        if not cands and r < 0.8:
            kind = "medium"
            qt = {t for t in tokenize(q.text) if len(t) > 1}
            sample = rng.sample(pool, min(300, len(pool)))
            scored = sorted(
                ((len(qt & w.tokens), w.key, w) for w in sample if w.title != q.title and w.key not in used),
                key=lambda x: (-x[0], x[1]),
            )
            cands = [w for n, _, w in scored[:8] if n > 0 and not contains_answer(w, q)]
        if not cands:
            kind = "easy"
            cands = [w for w in rng.sample(pool, min(20, len(pool))) if w.title != q.title]
        if cands:
            w = rng.choice(cands)
            used.add(w.key)
            add(w, 0, kind)


def held_out(path: Path) -> set[str]:
    """The question texts of a benchmark that training must not see."""
    if not path.exists():
        return set()
    return {json.loads(line)["question"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("data/eval_pairs"))
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument(
        "--exclude", type=Path, default=HELD_OUT, help="questions (JSONL, 'question' field) kept out of training"
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    splits: dict[str, list[dict[str, object]]] = {"train": [], "test": []}
    for lang in ("zh", "en"):
        part = build(lang, random.Random(f"{args.seed}-{lang}"))
        for k in splits:
            splits[k] += part[k]
    # Filtered after building, so every other pair is exactly what the seed gives.
    held = held_out(args.exclude)
    dropped = [r for r in splits["train"] if r["query"] in held]
    splits["train"] = [r for r in splits["train"] if r["query"] not in held]
    questions = len({r["query"] for r in dropped})
    print(f"held out of training: {questions} questions of {args.exclude} ({len(dropped)} pairs)")
    for k, rows in splits.items():
        with (args.out / f"{k}.jsonl").open("w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        for lang in ("zh", "en"):
            sub = [r for r in rows if r["lang"] == lang]
            kinds = Counter(str(r["kind"]) for r in sub)
            pos = sum(int(r["label"]) for r in sub) / max(1, len(sub))  # type: ignore[call-overload]
            print(
                f"{k} {lang}: {len(sub)} pairs, {pos:.0%} positive, "
                f"{len({r['window'] for r in sub})} windows, {dict(kinds)}"
            )


if __name__ == "__main__":
    main()
