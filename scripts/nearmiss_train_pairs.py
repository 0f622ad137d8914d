"""Passages and pairs of the templated training companies (``nearmiss_train`` draws the facts).

Every passage is written from a company's facts, in its language, as prose or as a table (in
the forms of ``nearmiss_train_tables``: raw pipe or Markdown text, or one line per row as crag
ingests it); each question is paired with one positive passage and two or three near misses
(see ``nearmiss_train`` for the kinds). A third of the questions are asked in the other language
than the company's passages (``nearmiss_train_names`` writes the names): a pair's ``lang`` is
its question's, ``passage_lang`` its passage's. For a table cell the positive is the table or
the rows that hold it; near misses are the same table's other rows, the same row for another
period, or another table about the same product. Deterministic for a given ``random.Random``.
"""

from __future__ import annotations

import random
from typing import Any

from nearmiss_render import T
from nearmiss_train import BENEFITS, CATEGORIES, JOBS, POLICIES, ROLES, Ask, Company, Product, make_company, pair
from nearmiss_train_names import in_lang, other, tidy, zh_name
from nearmiss_train_tables import holding, pick_form, piece, render

ZH_Q = "一二三四"
CROSS_SHARE = 1 / 3  # questions asked in the other language than the passages they are paired with
Passage = tuple[str, str]  # its text, and its table form ("" for prose)
OFFICE_COLS = {"address": ("地址", "Address"), "staff": ("员工人数", "Staff"), "opened": ("启用年份", "Opened")}


# -- passages --------------------------------------------------------------------------------------
def product_prose(r: random.Random, c: Company, p: Product, keys: list[str]) -> str:
    cat_zh, cat_en, _ = CATEGORIES[c.category]
    labels = {a.key: (a.zh, a.en) for a in p.attrs}
    if c.lang == "zh":
        out = [f"{p.name} 是{c.name}推出的{cat_zh}。"]
        for k in keys:
            out.append(r.choice(["{l}为 {v}。", "其{l}为 {v}。", "{l}：{v}。"]).format(l=labels[k][0], v=p.facts[k]))
        return "".join(out)
    article = "an" if cat_en[0] in "aeiou" else "a"
    out = [f"The {p.name} is {article} {cat_en} from {c.name}."]
    for k in keys:
        tpl = r.choice(["Its {l} is {v}.", "{L}: {v}.", "The {l} is {v}."])
        out.append(tpl.format(l=labels[k][1], L=labels[k][1].capitalize(), v=p.facts[k]))
    return " ".join(out)


def product_table(r: random.Random, c: Company, products: list[Product], keys: list[str]) -> T:
    labels = {a.key: (a.zh, a.en) for a in products[0].attrs}
    zh = c.lang == "zh"
    caption = f"{c.name}产品参数" if zh else f"{c.name} specifications"
    if len(products) == 1 or r.random() < 0.5:  # one column per product
        header = ("参数" if zh else "Specification", *(p.name for p in products))
        rows = tuple((labels[k][0 if zh else 1], *(p.facts[k] for p in products)) for k in keys)
    else:  # one row per product
        header = ("型号" if zh else "Model", *(labels[k][0 if zh else 1] for k in keys))
        rows = tuple((p.name, *(p.facts[k] for k in keys)) for p in products)
    return T(header, rows, caption)


def table(r: random.Random, t: T, rows: list[int] | None = None) -> Passage:
    """``t`` (or some of its rows) in a form drawn for this passage."""
    form = pick_form(r)
    return render(t, form, rows), form


def product_passage(r: random.Random, c: Company, p: Product, keys: list[str]) -> Passage:
    return (product_prose(r, c, p, keys), "") if r.random() < 0.5 else table(r, product_table(r, c, [p], keys))


def handbook(r: random.Random, c: Company, keys: list[str]) -> str:
    head = f"{c.name}员工手册" if c.lang == "zh" else f"{c.name} employee handbook"
    sentences = [policy_sentence(c, k) for k in keys]
    return head + "\n" + ("".join(sentences) if c.lang == "zh" else " ".join(sentences))


def policy_sentence(c: Company, key: str) -> str:
    spec = next(p for p in POLICIES if p[0] == key)
    return (spec[3] if c.lang == "zh" else spec[4]).format(v=c.policies[key])


def benefit_sentence(c: Company, key: str) -> str:
    spec = next(b for b in BENEFITS if b[0] == key)
    return spec[(3 if c.benefits[key] else 4) if c.lang == "zh" else (5 if c.benefits[key] else 6)]


def benefits_passage(c: Company, keys: list[str]) -> str:
    head = f"{c.name}员工福利" if c.lang == "zh" else f"Benefits at {c.name}"
    said = [benefit_sentence(c, k) for k in keys]
    return head + "\n" + ("".join(said) if c.lang == "zh" else " ".join(said))


def profile(c: Company, person: tuple[str, int, str, int, str], facts: list[str]) -> str:
    name, job, city, year, uni = person
    zh = c.lang == "zh"
    job_text = JOBS[job][0 if zh else 1]
    if zh:
        parts = [f"{name}是{c.name}的{job_text}，在{city}办公室工作。"]
        parts += [f"{name}于 {year} 年加入公司。" if f == "year" else f"{name}毕业于{uni}。" for f in facts]
        return "".join(parts)
    parts = [f"{name} is a {job_text} at {c.name}, based in the {city} office."]
    parts += [f"{name} joined the company in {year}." if f == "year" else f"{name} graduated from {uni}."
              for f in facts]  # fmt: skip
    return " ".join(parts)


def leadership(c: Company, keys: list[str]) -> str:
    zh = c.lang == "zh"
    head = f"{c.name}管理团队" if zh else f"{c.name} leadership"
    lines = [f"{ROLES[k][0]}：{c.roles[k]}" if zh else f"{c.roles[k]}, {ROLES[k][1]}" for k in keys]
    return head + "\n" + "\n".join(lines)


def offices_table(c: Company, rows: list[tuple[str, str, int, int]], cols: list[str]) -> T:
    zh = c.lang == "zh"
    header = ("办公地点" if zh else "Office", *(OFFICE_COLS[k][0 if zh else 1] for k in cols))
    index = {"address": 1, "staff": 2, "opened": 3}
    body = tuple((o[0], *(str(o[index[k]]) for k in cols)) for o in rows)
    return T(header, body, f"{c.name}办公地点" if zh else f"{c.name} offices")


def quarter(c: Company, year: int, q: int) -> str:
    return f"{year}年第{ZH_Q[q - 1]}季度" if c.lang == "zh" else f"Q{q} {year}"


def shipments_table(c: Company, products: list[Product], year: int) -> T:
    zh = c.lang == "zh"
    header = ("产品" if zh else "Product", *(quarter(c, year, q) for q in (1, 2, 3, 4)))
    body = tuple((p.name, *(f"{c.shipments[(p.name, year, q)]:,}" for q in (1, 2, 3, 4))) for p in products)
    return T(header, body, f"{c.name}季度出货量（台）" if zh else f"{c.name} units shipped per quarter")


def rows_of(t: T, key: str) -> list[int]:
    return [i for i, row in enumerate(t.rows) if row[0] == key]


# -- pairs -----------------------------------------------------------------------------------------
class _Pairs:
    """The pairs of one company: its questions (either language) and their passages, in ``out``."""

    def __init__(self, r: random.Random, c: Company) -> None:
        self.r, self.c = r, c
        self.out: list[dict[str, Any]] = []

    def lang(self) -> str:
        """The language of the next question: a third of them the other one than the passages'."""
        return other(self.c.lang) if self.r.random() < CROSS_SHARE else self.c.lang

    def name(self, text: str, lang: str) -> str:
        """A name of the company (written in its language) as a question in ``lang`` writes it."""
        named = in_lang(text, self.c.lang, lang)
        return zh_name(named) if lang == "zh" else named

    def add(self, ask: Ask, passage: Passage | str, label: int, miss: str = "") -> None:
        text, form = (passage, "") if isinstance(passage, str) else passage
        self.out.append(pair(ask, text, label, self.c, miss, form))


def company_pairs(r: random.Random, c: Company, others: list[Company]) -> list[dict[str, Any]]:
    b = _Pairs(r, c)
    for p in c.products:
        for a in r.sample(p.attrs, 4):
            _product_pairs(b, p, a.key)
    for k in r.sample([p[0] for p in POLICIES], 4):
        ql = b.lang()
        spec = next(p for p in POLICIES if p[0] == k)
        ask = Ask(tidy((spec[1] if ql == "zh" else spec[2]).format(c=b.name(c.name, ql))), ql, c.name, k,
                  policy_sentence(c, k))  # fmt: skip
        rest = [p[0] for p in POLICIES if p[0] != k]
        b.add(ask, handbook(r, c, [k, r.choice(rest)]), 1)
        b.add(ask, handbook(r, c, r.sample(rest, 3)), 0, "other_attribute")
        b.add(ask, handbook(r, r.choice(others), [k, r.choice(rest)]), 0, "other_entity")
    for k in r.sample([x[0] for x in BENEFITS], 2):
        ql = b.lang()
        ben = next(x for x in BENEFITS if x[0] == k)
        ask = Ask(tidy((ben[1] if ql == "zh" else ben[2]).format(c=b.name(c.name, ql))), ql, c.name, k,
                  benefit_sentence(c, k))  # fmt: skip
        rest = [x[0] for x in BENEFITS if x[0] != k]
        b.add(ask, benefits_passage(c, [k, r.choice(rest)]), 1)
        b.add(ask, benefits_passage(c, r.sample(rest, 3)), 0, "silent")
    for _ in range(2):
        _shipments_pairs(b)
    _people_pairs(b)
    zh = c.lang == "zh"
    for k in ["ceo", r.choice(["cfo", "cto", "coo"])]:
        ql = b.lang()
        query = f"{b.name(c.name, ql)}的{ROLES[k][0]}是谁？" if ql == "zh" else \
            f"Who is the {ROLES[k][1]} of {b.name(c.name, ql)}?"  # fmt: skip
        ask = Ask(tidy(query), ql, c.name, k, c.roles[k], ROLES[k][0 if zh else 1])
        rest = [x for x in ROLES if x != k]
        b.add(ask, leadership(c, [k, *r.sample(rest, 2)]), 1)
        b.add(ask, leadership(c, r.sample(rest, 3)), 0, "unnamed_role")
    _office_pairs(b)
    return b.out


def _product_pairs(b: _Pairs, p: Product, key: str) -> None:
    """A question about one attribute of ``p``: the positive in prose, its own table or the
    catalogue's rows; near misses of the same product (other facts, other rows of the catalogue,
    its shipments) and of its siblings (their passages, their table, their rows of the catalogue)."""
    r, c = b.r, b.c
    a = next(x for x in p.attrs if x.key == key)
    ql = b.lang()
    label = a.zh if c.lang == "zh" else a.en
    ask = Ask(tidy(r.choice(a.q_zh if ql == "zh" else a.q_en).format(e=b.name(p.name, ql))), ql, p.name, key,
              p.facts[key], label)  # fmt: skip
    siblings = [q for q in c.products if q is not p]
    rest = [x.key for x in p.attrs if x.key != key]
    shown = [key, *r.sample(rest, 2)]
    r.shuffle(shown)
    catalogue = product_table(r, c, c.products, shown)  # every product: one row or one column each
    hits = holding(catalogue, p.name, label)
    by_product = label in catalogue.header  # one row per product: its other rows are the siblings
    if r.random() < 0.6:
        b.add(ask, product_passage(r, c, p, shown), 1)
    else:
        b.add(ask, table(r, catalogue, piece(r, catalogue, hits, hold=True)), 1)
    roll = r.random()
    if roll < 0.25:  # another table about the same product
        year = r.choice((2022, 2023, 2024))
        units = shipments_table(c, c.products, year)
        b.add(ask, table(r, units, piece(r, units, rows_of(units, p.name), hold=True)), 0, "other_attribute")
    elif roll < 0.55 and not by_product:  # the catalogue's rows of the product's other attributes
        b.add(ask, table(r, catalogue, piece(r, catalogue, hits, hold=False)), 0, "other_attribute")
    else:
        b.add(ask, product_passage(r, c, p, r.sample(rest, 3)), 0, "other_attribute")
    roll = r.random()
    if roll < 0.4 and by_product:  # the catalogue's rows of the siblings
        b.add(ask, table(r, catalogue, piece(r, catalogue, hits, hold=False)), 0, "other_entity")
    elif roll < 0.7:
        b.add(ask, product_passage(r, c, r.choice(siblings), [key, *r.sample(rest, 1)]), 0, "other_entity")
    else:
        b.add(ask, table(r, product_table(r, c, siblings, [key, *r.sample(rest, 1)])), 0, "other_entity")


def _shipments_pairs(b: _Pairs) -> None:
    """Units of one product in one quarter: its row of the year's table; the same row of the year
    before, the other products' rows and the product's specifications are near misses."""
    r, c = b.r, b.c
    p, year, q = r.choice(c.products), r.choice((2023, 2024)), r.randint(1, 4)
    ql = b.lang()
    company, product = b.name(c.name, ql), b.name(p.name, ql)
    query = f"{company}的{product}在 {year} 年第{ZH_Q[q - 1]}季度出货多少台？" if ql == "zh" else \
        f"How many {product} units did {company} ship in Q{q} {year}?"  # fmt: skip
    ask = Ask(tidy(query), ql, p.name, "shipments", f"{c.shipments[(p.name, year, q)]:,}", quarter(c, year, q))
    this = shipments_table(c, c.products, year)
    b.add(ask, table(r, this, piece(r, this, rows_of(this, p.name), hold=True)), 1)
    before = shipments_table(c, c.products, year - 1)
    b.add(ask, table(r, before, piece(r, before, rows_of(before, p.name), hold=True)), 0, "other_period")
    if r.random() < 0.5:
        b.add(ask, table(r, this, piece(r, this, rows_of(this, p.name), hold=False)), 0, "other_entity")
    else:
        b.add(ask, table(r, shipments_table(c, [x for x in c.products if x is not p], year)), 0, "other_entity")
    spec = product_table(r, c, c.products if r.random() < 0.5 else [p], r.sample([a.key for a in p.attrs], 3))
    b.add(ask, table(r, spec), 0, "other_attribute")


def _office_pairs(b: _Pairs) -> None:
    r, c = b.r, b.c
    zh = c.lang == "zh"
    office = r.choice(c.offices)
    other_offices = [o for o in c.offices if o is not office]
    asks = (("address", "{c}{o}办公室的地址是什么？", "What is the address of {c} {o} office?"),
            ("staff", "{c}{o}办公室有多少员工？", "How many people work at {c} {o} office?"))  # fmt: skip
    for col, q_zh, q_en in asks:
        ql = b.lang()
        company = b.name(c.name, ql)
        company = company if ql == "zh" else company + ("'" if company.endswith("s") else "'s")  # Labs' / Home's
        query = (q_zh if ql == "zh" else q_en).format(c=company, o=b.name(office[0], ql))
        value = str(office[1] if col == "address" else office[2])
        ask = Ask(tidy(query), ql, office[0], col, value, OFFICE_COLS[col][0 if zh else 1])
        rest = [x for x in OFFICE_COLS if x != col]
        rows = [office, *r.sample(other_offices, 1)]
        every = offices_table(c, c.offices, [col, rest[0]])
        if r.random() < 0.5:
            b.add(ask, table(r, offices_table(c, rows, [col, rest[0]])), 1)
        else:
            b.add(ask, table(r, every, piece(r, every, rows_of(every, office[0]), hold=True)), 1)
        b.add(ask, table(r, offices_table(c, rows, rest)), 0, "other_attribute")
        if r.random() < 0.5:
            b.add(ask, table(r, offices_table(c, other_offices, [col])), 0, "other_entity")
        else:
            b.add(ask, table(r, every, piece(r, every, rows_of(every, office[0]), hold=False)), 0, "other_entity")


def _people_pairs(b: _Pairs) -> None:
    r, c = b.r, b.c
    zh = c.lang == "zh"
    a, bb, solo = c.people[0], c.people[1], c.people[2]
    # A name two people share: the question names the job, the other bearer is a near miss.
    for who, namesake in ((a, bb), (bb, a)):
        ql = b.lang()
        job, asked_job = JOBS[who[1]][0 if zh else 1], JOBS[who[1]][0 if ql == "zh" else 1]
        person, company = b.name(who[0], ql), b.name(c.name, ql)
        query = f"{company}的{asked_job}{person}是哪一年加入公司的？" if ql == "zh" else \
            f"When did {person}, the {asked_job}, join {company}?"  # fmt: skip
        ask = Ask(tidy(query), ql, f"{who[0]} ({job})", "joined", str(who[3]), job)
        b.add(ask, profile(c, who, ["year"]), 1)
        b.add(ask, profile(c, namesake, ["year"]), 0, "namesake")
        b.add(ask, profile(c, who, ["uni"]), 0, "other_attribute")
    ql = b.lang()
    person = b.name(solo[0], ql)
    query = f"{person}毕业于哪所大学？" if ql == "zh" else f"Which university did {person} graduate from?"
    ask = Ask(tidy(query), ql, solo[0], "university", solo[4])
    b.add(ask, profile(c, solo, ["uni", "year"][: r.randint(1, 2)]), 1)
    b.add(ask, profile(c, solo, ["year"]), 0, "other_attribute")


def train_pairs(seed: int, per_lang: int) -> list[dict[str, Any]]:
    """Pairs of ``per_lang`` invented companies per language, in a fixed order."""
    r = random.Random(seed)
    out: list[dict[str, Any]] = []
    for lang in ("zh", "en"):
        used: set[str] = set()
        companies = [make_company(r, lang, used) for _ in range(per_lang)]
        for c in companies:
            out += company_pairs(r, c, [o for o in companies if o is not c])
    return out
