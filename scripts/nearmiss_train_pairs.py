"""Passages and pairs of the templated training companies (``nearmiss_train`` draws the facts).

Every passage is written from a company's facts, in its language, as prose or as a table; each
question is paired with one positive passage and two or three near misses (see
``nearmiss_train`` for the kinds). Deterministic for a given ``random.Random``.
"""

from __future__ import annotations

import random
from typing import Any

from nearmiss_render import table_text
from nearmiss_train import BENEFITS, CATEGORIES, JOBS, POLICIES, ROLES, Company, Product, make_company, pair

ZH_Q = "一二三四"


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


def product_table(r: random.Random, c: Company, products: list[Product], keys: list[str]) -> str:
    labels = {a.key: (a.zh, a.en) for a in products[0].attrs}
    zh = c.lang == "zh"
    caption = f"{c.name}产品参数" if zh else f"{c.name} specifications"
    if len(products) == 1 or r.random() < 0.5:  # one column per product
        header = ("参数" if zh else "Specification", *(p.name for p in products))
        rows = tuple((labels[k][0 if zh else 1], *(p.facts[k] for p in products)) for k in keys)
    else:  # one row per product
        header = ("型号" if zh else "Model", *(labels[k][0 if zh else 1] for k in keys))
        rows = tuple((p.name, *(p.facts[k] for k in keys)) for p in products)
    return table_text(header, rows, caption)


def product_passage(r: random.Random, c: Company, p: Product, keys: list[str]) -> str:
    return product_prose(r, c, p, keys) if r.random() < 0.5 else product_table(r, c, [p], keys)


def handbook(r: random.Random, c: Company, keys: list[str]) -> str:
    head = f"{c.name}员工手册" if c.lang == "zh" else f"{c.name} employee handbook"
    by_key = {p[0]: p for p in POLICIES}
    sentences = [by_key[k][3 if c.lang == "zh" else 4].format(v=c.policies[k]) for k in keys]
    return head + "\n" + ("".join(sentences) if c.lang == "zh" else " ".join(sentences))


def benefits_passage(c: Company, keys: list[str]) -> str:
    head = f"{c.name}员工福利" if c.lang == "zh" else f"Benefits at {c.name}"
    by_key = {b[0]: b for b in BENEFITS}
    zh = c.lang == "zh"
    said = [by_key[k][(3 if c.benefits[k] else 4) if zh else (5 if c.benefits[k] else 6)] for k in keys]
    return head + "\n" + ("".join(said) if zh else " ".join(said))


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


def offices_table(c: Company, rows: list[tuple[str, str, int, int]], cols: list[str]) -> str:
    zh = c.lang == "zh"
    names = {"address": ("地址", "Address"), "staff": ("员工人数", "Staff"), "opened": ("启用年份", "Opened")}
    header = ("办公地点" if zh else "Office", *(names[k][0 if zh else 1] for k in cols))
    index = {"address": 1, "staff": 2, "opened": 3}
    body = tuple((o[0], *(str(o[index[k]]) for k in cols)) for o in rows)
    return table_text(header, body, f"{c.name}办公地点" if zh else f"{c.name} offices")


def shipments_table(c: Company, products: list[Product], year: int) -> str:
    zh = c.lang == "zh"
    quarters = [f"{year}年第{ZH_Q[q - 1]}季度" if zh else f"Q{q} {year}" for q in (1, 2, 3, 4)]
    header = ("产品" if zh else "Product", *quarters)
    body = tuple((p.name, *(f"{c.shipments[(p.name, year, q)]:,}" for q in (1, 2, 3, 4))) for p in products)
    return table_text(header, body, f"{c.name}季度出货量（台）" if zh else f"{c.name} units shipped per quarter")


# -- pairs -----------------------------------------------------------------------------------------
def company_pairs(r: random.Random, c: Company, others: list[Company]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    zh = c.lang == "zh"
    for p in c.products:
        siblings = [q for q in c.products if q is not p]
        keys = [a.key for a in p.attrs]
        for a in r.sample(p.attrs, 4):
            query = r.choice(a.q_zh if zh else a.q_en).format(e=p.name + " " if zh else p.name)  # "星河 X2 的…"
            rest = [k for k in keys if k != a.key]
            shown = [a.key, *r.sample(rest, 2)]
            r.shuffle(shown)
            out.append(pair(query, product_passage(r, c, p, shown), 1, c, p.name, attr=a.key))
            out.append(pair(query, product_passage(r, c, p, r.sample(rest, 3)), 0, c, p.name, "other_attribute", a.key))
            sib = r.choice(siblings)
            passage = product_passage(r, c, sib, [a.key, *r.sample(rest, 1)]) if r.random() < 0.6 else \
                product_table(r, c, siblings, [a.key, *r.sample(rest, 1)])  # fmt: skip
            out.append(pair(query, passage, 0, c, p.name, "other_entity", a.key))
    for k in r.sample([p[0] for p in POLICIES], 4):
        spec = next(p for p in POLICIES if p[0] == k)
        query = (spec[1] if zh else spec[2]).format(c=c.name)
        rest = [p[0] for p in POLICIES if p[0] != k]
        out.append(pair(query, handbook(r, c, [k, r.choice(rest)]), 1, c, c.name, attr=k))
        out.append(pair(query, handbook(r, c, r.sample(rest, 3)), 0, c, c.name, "other_attribute", k))
        out.append(pair(query, handbook(r, r.choice(others), [k, r.choice(rest)]), 0, c, c.name, "other_entity", k))
    for k in r.sample([b[0] for b in BENEFITS], 2):
        spec = next(b for b in BENEFITS if b[0] == k)
        query = (spec[1] if zh else spec[2]).format(c=c.name)
        rest = [b[0] for b in BENEFITS if b[0] != k]
        out.append(pair(query, benefits_passage(c, [k, r.choice(rest)]), 1, c, c.name, attr=k))
        out.append(pair(query, benefits_passage(c, r.sample(rest, 3)), 0, c, c.name, "silent", k))
    for _ in range(2):
        p, year, q = r.choice(c.products), r.choice((2023, 2024)), r.randint(1, 4)
        query = f"{c.name}的{p.name} 在 {year} 年第{ZH_Q[q - 1]}季度出货多少台？" if zh else \
            f"How many {p.name} units did {c.name} ship in Q{q} {year}?"  # fmt: skip
        out.append(pair(query, shipments_table(c, c.products, year), 1, c, p.name, attr="shipments"))
        out.append(pair(query, shipments_table(c, c.products, year - 1), 0, c, p.name, "other_period", "shipments"))
        others_p = [x for x in c.products if x is not p]
        out.append(pair(query, shipments_table(c, others_p, year), 0, c, p.name, "other_entity", "shipments"))
    out += _people_pairs(r, c)
    for k in ["ceo", r.choice(["cfo", "cto", "coo"])]:
        query = f"{c.name}的{ROLES[k][0]}是谁？" if zh else f"Who is the {ROLES[k][1]} of {c.name}?"
        rest = [x for x in ROLES if x != k]
        out.append(pair(query, leadership(c, [k, *r.sample(rest, 2)]), 1, c, c.name, attr=k))
        out.append(pair(query, leadership(c, r.sample(rest, 3)), 0, c, c.name, "unnamed_role", k))
    office = r.choice(c.offices)
    other_offices = [o for o in c.offices if o is not office]
    asks = (("address", "{c}{o}办公室的地址是什么？", "What is the address of {c}'s {o} office?"),
            ("staff", "{c}{o}办公室有多少员工？", "How many people work at {c}'s {o} office?"))  # fmt: skip
    for col, q_zh, q_en in asks:
        query = (q_zh if zh else q_en).format(c=c.name, o=office[0])
        rest = [x for x in ("address", "staff", "opened") if x != col]
        rows = [office, *r.sample(other_offices, 1)]
        out.append(pair(query, offices_table(c, rows, [col, rest[0]]), 1, c, office[0], attr=col))
        out.append(pair(query, offices_table(c, rows, rest), 0, c, office[0], "other_attribute", col))
        out.append(pair(query, offices_table(c, other_offices, [col]), 0, c, office[0], "other_entity", col))
    return out


def _people_pairs(r: random.Random, c: Company) -> list[dict[str, Any]]:
    zh = c.lang == "zh"
    out: list[dict[str, Any]] = []
    a, b, solo = c.people[0], c.people[1], c.people[2]
    # A name two people share: the question names the job, the other bearer is a near miss.
    for who, other in ((a, b), (b, a)):
        job = JOBS[who[1]][0 if zh else 1]
        query = f"{c.name}的{job}{who[0]}是哪一年加入公司的？" if zh else \
            f"When did {who[0]}, the {job}, join {c.name}?"  # fmt: skip
        out.append(pair(query, profile(c, who, ["year"]), 1, c, f"{who[0]} ({job})", attr="joined"))
        out.append(pair(query, profile(c, other, ["year"]), 0, c, f"{who[0]} ({job})", "namesake", "joined"))
        out.append(pair(query, profile(c, who, ["uni"]), 0, c, f"{who[0]} ({job})", "other_attribute", "joined"))
    query = f"{solo[0]}毕业于哪所大学？" if zh else f"Which university did {solo[0]} graduate from?"
    out.append(pair(query, profile(c, solo, ["uni", "year"][: r.randint(1, 2)]), 1, c, solo[0], attr="university"))
    out.append(pair(query, profile(c, solo, ["year"]), 0, c, solo[0], "other_attribute", "university"))
    return out


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
