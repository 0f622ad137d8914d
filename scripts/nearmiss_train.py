"""Templated training pairs for the near-miss evaluator: invented companies none of the dev set's.

For each invented company (Chinese ones write in Chinese, English ones in English) the generator
draws products with specifications (no two of a company's products share a value), handbook
policies, benefits, people (two sharing a name, who joined in different years), a leadership team
(one person per role), offices and a shipments table, then asks about one attribute at a time,
a third of the time in the other language (``nearmiss_train_names``), and pairs the question with
passages written from the same facts (``nearmiss_train_pairs``; tables in the forms of
``nearmiss_train_tables``):

* ``positive`` (label 1): a passage about the asked entity that states the asked attribute;
* ``near_miss`` (label 0), ``miss`` says how: ``other_attribute`` (same entity, other facts, or
  another table about it), ``other_entity`` (a sibling product, another office, other rows of the
  same table, another company's handbook stating the same attribute), ``other_period`` (the same
  table row for another year), ``namesake`` (the other person of the same name), ``unnamed_role``
  (a leadership passage without the asked role), ``silent`` (a benefits passage that does not
  mention the asked benefit).

Each pair carries the ``answer`` as its passage writes it and the ``field`` it stands under, so
``scripts/check_nearmiss_pairs.py`` can check every label. Deterministic for a given
``random.Random``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# -- name pools (none of them is a name of the dev set) ----------------------------------------------
# fmt: off
EN_STEMS = ["Bluefin", "Copperleaf", "Driftwood", "Emberline", "Foxglove", "Granite", "Harborview", "Ironbark",
            "Juniper", "Lumen", "Marigold", "Nimbus", "Oakhaven", "Pinecrest", "Quartzite", "Redwood", "Saltmarsh",
            "Tidewater", "Umberfield", "Vireo", "Willowbrook", "Yarrow", "Zephyr", "Alderway", "Basalt", "Cedarline",
            "Dovetail", "Elmstead", "Fjordline", "Gullwing", "Heron", "Indigo"]
# Suffixes by category, so a phone maker is not called "... Motors".
EN_SUFFIX = {"phone": ["Labs", "Devices", "Electronics", "Mobile"], "earbuds": ["Audio", "Labs", "Electronics"],
             "purifier": ["Home", "Appliances", "Systems"], "ebike": ["Motors", "Mobility", "Cycles"]}
ZH_STEMS = ["云帆", "星途", "海川", "远岫", "松涛", "锦程", "明湖", "青石", "白鹭", "赤松", "墨竹",
            "朗月", "清溪", "蓝鲸", "金穗", "银杏", "丹霞", "飞羽", "长风", "观澜", "晴川", "知行",
            "启明", "拓野", "若水", "凌云", "沐光", "南山", "北辰", "东篱", "西岭", "星火"]
ZH_SUFFIX = {"phone": ["科技", "电子", "数码"], "earbuds": ["声学", "电子", "数码"],
             "purifier": ["电器", "智能", "环境"], "ebike": ["智造", "出行", "车业"]}
EN_FAMILY = ["Aria", "Bolt", "Crest", "Dune", "Echo", "Flint", "Gale", "Halo", "Iris", "Jade", "Koda", "Lyra", "Mako",
             "Nova", "Orca", "Pika", "Quill", "Rhea", "Sola", "Tern", "Vega", "Wren", "Zara", "Atlas", "Breeze"]
ZH_FAMILY = ["星河", "晨曦", "雪松", "海燕", "流光", "青竹", "赤焰", "墨玉", "琥珀", "极光", "远山",
             "秋水", "白桦", "松月", "苍穹", "鲸歌"]
MODELS = ["X2", "M4", "Pro", "Air", "Max", "Neo", "T6", "V8", "Plus", "Mini", "K7", "E1"]
EN_FIRST = ["Alice", "Brian", "Chloe", "David", "Elena", "Felix", "Grace", "Hugo", "Irene", "Jonas", "Karen", "Liam",
            "Maya", "Nathan", "Olivia", "Peter", "Rosa", "Samuel", "Tara", "Victor", "Wendy", "Yusuf", "Zoe", "Omar"]
EN_LAST = ["Abbott", "Brennan", "Castillo", "Dawson", "Eriksen", "Fischer", "Gallagher", "Hughes", "Iverson",
           "Jensen", "Keller", "Lambert", "Moreau", "Novak", "Okafor", "Pereira", "Quinn", "Romero", "Sato", "Turner"]
ZH_SURNAME = ["张", "李", "刘", "杨", "赵", "黄", "周", "吴", "徐", "孙", "胡", "朱", "高", "林", "何",
              "郭", "马", "罗"]
ZH_GIVEN = ["伟", "芳", "敏", "强", "洋", "艳", "杰", "涛", "明", "超", "秀兰", "霞", "平", "刚", "桂英",
            "建华", "晓东", "海燕", "志强", "丽娟", "俊杰", "雨桐", "子轩", "思远"]
EN_CITIES = ["Austin", "Denver", "Boston", "Dublin", "Lyon", "Munich", "Oslo", "Seoul", "Toronto", "Valencia",
             "Krakow", "Melbourne"]
ZH_CITIES = ["北京", "上海", "广州", "武汉", "南京", "西安", "长沙", "厦门", "青岛", "合肥", "天津", "重庆"]
EN_UNIS = ["Lakeside Polytechnic", "Northfield University", "Coastal Institute of Technology", "Westmoor College"]
ZH_UNIS = ["华东理工学院", "西南工业大学", "北方交通学院", "东海大学"]


def _date(r: random.Random, lang: str) -> str:
    y, m, d = r.randint(2019, 2024), r.randint(1, 12), r.randint(1, 28)
    months = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
              "November", "December"]  # fmt: skip
    return f"{y} 年 {m} 月 {d} 日" if lang == "zh" else f"{months[m - 1]} {d}, {y}"


def _num(n: int) -> str:
    return f"{n:,}"


# An attribute: zh label, en label, value (rng, lang) -> text, zh questions, en questions ({e} = entity).
Value = Callable[[random.Random, str], str]


@dataclass(frozen=True)
class Attr:
    key: str
    zh: str
    en: str
    value: Value
    q_zh: tuple[str, ...]
    q_en: tuple[str, ...]


def _unit(lo: int, hi: int, step: int, zh: str, en: str, comma: bool = False) -> Value:
    def gen(r: random.Random, lang: str) -> str:
        n = r.randrange(lo, hi + 1, step)
        text = _num(n) if comma and lang == "en" else str(n)
        return f"{text} {zh if lang == 'zh' else en}"

    return gen


def _price(lo: int, hi: int) -> Value:
    def gen(r: random.Random, lang: str) -> str:
        n = r.randrange(lo + 1, hi + 2, 100) - 1  # 999, 1099, ...
        return f"{n} 元" if lang == "zh" else f"${_num(n // 70 * 10 + 9)}"  # in dollars: 139, 149, ...

    return gen


def _colours(r: random.Random, lang: str) -> str:
    zh = ["曜石黑", "冰川蓝", "珍珠白", "松柏绿", "晚霞橙", "星空灰"]
    en = ["Midnight", "Glacier Blue", "Pearl White", "Pine Green", "Sunset Orange", "Graphite"]
    idx = r.sample(range(6), 2)
    return "、".join(zh[i] for i in idx) if lang == "zh" else " and ".join(en[i] for i in idx)


def _a(key: str, zh: str, en: str, value: Value, q_zh: tuple[str, ...], q_en: tuple[str, ...]) -> Attr:
    return Attr(key, zh, en, value, q_zh, q_en)


def _price_attr(lo: int, hi: int) -> Attr:
    return _a("price", "售价", "price", _price(lo, hi), ("{e}多少钱？", "{e}的售价是多少？"),
              ("How much does the {e} cost?", "What is the price of the {e}?"))


RELEASE = _a("release", "发布日期", "release date", _date, ("{e}是什么时候发布的？", "{e}的发布日期是哪天？"),
             ("When was the {e} released?", "What is the release date of the {e}?"))
COLOURS = _a("colours", "颜色", "colours", _colours, ("{e}有哪些颜色？",), ("Which colours does the {e} come in?",))
WEIGHT_G = _a("weight", "重量", "weight", _unit(150, 240, 1, "克", "g"), ("{e}有多重？", "{e}的重量是多少？"),
              ("How heavy is the {e}?", "What does the {e} weigh?"))
WEIGHT_KG = _a("weight", "重量", "weight", _unit(5, 30, 1, "千克", "kg"), ("{e}有多重？", "{e}的重量是多少？"),
               ("How heavy is the {e}?", "What does the {e} weigh?"))
CATEGORIES: dict[str, tuple[str, str, list[Attr]]] = {
    "phone": ("手机", "smartphone", [
        _a("battery", "电池容量", "battery capacity", _unit(3800, 6000, 100, "毫安时", "mAh", True),
           ("{e}的电池容量是多少？", "{e}电池有多大？"), ("What is the battery capacity of the {e}?",
                                                 "How big is the {e}'s battery?")),
        _a("screen", "屏幕尺寸", "screen size", lambda r, lang: f"{r.choice([6.1, 6.3, 6.5, 6.7, 6.8])} "
           + ("英寸" if lang == "zh" else "inches"), ("{e}的屏幕有多大？",), ("How large is the {e}'s screen?",)),
        _a("charging", "充电功率", "charging power", _unit(18, 120, 3, "瓦", "W"), ("{e}支持多少瓦快充？",),
           ("What is the charging power of the {e}?",)),
        WEIGHT_G, _price_attr(999, 5999), RELEASE, COLOURS]),
    "earbuds": ("无线耳机", "wireless earbuds", [
        _a("playtime", "单次续航", "battery life", _unit(5, 11, 1, "小时", "hours"), ("{e}单次能用多久？",),
           ("How long does the {e} battery last on one charge?",)),
        _a("case", "充电盒容量", "charging case capacity", _unit(300, 650, 10, "毫安时", "mAh"),
           ("{e}充电盒的电池容量是多少？",), ("What is the capacity of the {e} charging case?",)),
        _a("water", "防水等级", "water resistance", lambda r, lang: r.choice(["IPX4", "IPX5", "IP54", "IP55"]),
           ("{e}的防水等级是多少？",), ("What is the water resistance rating of the {e}?",)),
        _price_attr(199, 1499), RELEASE, COLOURS]),
    "purifier": ("空气净化器", "air purifier", [
        _a("cadr", "洁净空气量", "CADR", lambda r, lang: f"{r.randrange(300, 800, 10)} "
           + ("立方米/小时" if lang == "zh" else "m³/h"), ("{e}的 CADR 是多少？", "{e}的洁净空气量是多少？"),
           ("What is the CADR of the {e}?",)),
        _a("noise", "最低噪音", "noise in sleep mode", _unit(22, 35, 1, "分贝", "dB"), ("{e}睡眠模式的噪音是多少？",),
           ("How loud is the {e} in sleep mode?",)),
        _a("filter", "滤网寿命", "filter life", _unit(6, 18, 1, "个月", "months"), ("{e}的滤网能用多久？",),
           ("How long does the {e} filter last?",)),
        _a("power", "额定功率", "rated power", _unit(30, 90, 1, "瓦", "W"), ("{e}的额定功率是多少？",),
           ("What is the rated power of the {e}?",)),
        WEIGHT_KG, _price_attr(699, 4999), RELEASE]),
    "ebike": ("电动自行车", "e-bike", [
        _a("range", "续航里程", "range", _unit(40, 150, 5, "公里", "km"), ("{e}能骑多远？", "{e}的续航里程是多少？"),
           ("What is the range of the {e}?",)),
        _a("battery", "电池容量", "battery capacity", _unit(300, 900, 10, "瓦时", "Wh"), ("{e}的电池容量是多少？",),
           ("What is the battery capacity of the {e}?",)),
        _a("charge_time", "充电时间", "charging time", lambda r, lang: f"{r.choice([3, 3.5, 4, 4.5, 5, 6, 7])} "
           + ("小时" if lang == "zh" else "hours"), ("{e}充满电要多久？",), ("How long does the {e} take to charge?",)),
        WEIGHT_KG, _price_attr(1999, 9999), RELEASE]),
}  # fmt: skip

# Policies: key, zh question, en question, zh sentence, en sentence ({c} company, {v} value), value.
POLICIES: list[tuple[str, str, str, str, str, Callable[[random.Random], int]]] = [
    ("leave", "{c}员工每年有几天年假？", "How many days of annual leave do {c} employees get?",
     "员工每年享有带薪年假 {v} 天。", "Employees get {v} days of paid annual leave a year.",
     lambda r: r.randint(5, 25)),
    ("remote", "{c}员工每周可以远程办公几天？", "How many days a week can {c} employees work from home?",
     "转正后员工每周最多可远程办公 {v} 天。", "After probation, staff may work from home up to {v} days a week.",
     lambda r: r.randint(1, 3)),
    ("meal", "{c}的餐补是多少？", "What is the meal allowance at {c}?", "公司每月发放餐补 {v} 元。",
     "The company pays a meal allowance of {v} yuan a month.", lambda r: r.randrange(300, 1000, 50)),
    ("parental", "{c}的育儿假有几周？", "How long is parental leave at {c}?", "员工可享受带薪育儿假 {v} 周。",
     "Parents get {v} weeks of paid parental leave.", lambda r: r.randint(4, 26)),
    ("probation", "{c}的试用期是几个月？", "How long is the probation period at {c}?", "新员工试用期为 {v} 个月。",
     "New employees have a probation period of {v} months.", lambda r: r.randint(1, 6)),
    ("hotel", "{c}出差每晚住宿上限是多少？", "What is the nightly hotel limit on business trips at {c}?",
     "出差住宿标准为每晚不超过 {v} 元。", "Hotels on business trips are capped at {v} yuan a night.",
     lambda r: r.randrange(300, 900, 50)),
    ("gym", "{c}的健身补贴是每月多少钱？", "How much is the monthly gym subsidy at {c}?",
     "员工每月可报销健身费用 {v} 元。", "Employees can claim up to {v} yuan a month for a gym.",
     lambda r: r.randrange(100, 500, 50)),
    ("training", "{c}每年给员工多少培训预算？", "What is the yearly training budget per employee at {c}?",
     "每位员工每年有 {v} 元的培训预算。", "Each employee has a training budget of {v} yuan a year.",
     lambda r: r.randrange(1000, 8000, 500)),
]  # fmt: skip

# Yes/no benefits: key, zh question, en question, zh yes, zh no, en yes, en no, zh mention, en mention.
BENEFITS: list[tuple[str, ...]] = [
    ("car", "{c}给员工配公司车吗？", "Does {c} give employees a company car?", "销售岗位员工可申请公司配车。",
     "公司不为员工配备公司车。", "Sales staff can apply for a company car.",
     "The company does not provide company cars.", "公司用车", "company cars"),
    ("options", "{c}给员工发股票期权吗？", "Does {c} offer stock options?", "入职满一年的员工可获得股票期权。",
     "公司不向员工授予股票期权。", "Employees receive stock options after one year.",
     "The company does not grant stock options.", "股票期权", "stock options"),
    ("shuttle", "{c}有通勤班车吗？", "Does {c} run a shuttle bus for staff?", "公司在早晚高峰开通通勤班车。",
     "公司没有通勤班车。", "A staff shuttle bus runs at rush hours.", "There is no staff shuttle bus.", "通勤班车",
     "shuttle bus"),
    ("lunch", "{c}提供免费午餐吗？", "Does {c} provide free lunch?", "公司食堂为员工提供免费午餐。",
     "公司不提供免费午餐。", "The canteen serves free lunch to employees.", "Lunch is not provided free of charge.",
     "免费午餐", "free lunch"),
    ("childcare", "{c}有托儿补贴吗？", "Does {c} pay a childcare subsidy?", "有 6 岁以下子女的员工每月享受托儿补贴。",
     "公司不发放托儿补贴。", "Parents of children under six get a monthly childcare subsidy.",
     "The company pays no childcare subsidy.", "托儿补贴", "childcare subsidy"),
    ("insurance", "{c}给员工买补充医疗保险吗？", "Does {c} pay for supplementary health insurance?",
     "公司为员工购买补充医疗保险。", "公司不提供补充医疗保险。", "The company pays supplementary health insurance.",
     "Supplementary health insurance is not provided.", "补充医疗保险", "supplementary health insurance"),
]  # fmt: skip

ROLES = {"ceo": ("首席执行官", "CEO"), "cfo": ("首席财务官", "CFO"), "cto": ("首席技术官", "CTO"),
         "coo": ("首席运营官", "COO"), "chair": ("董事长", "chairman"), "founder": ("创始人", "founder")}  # fmt: skip
JOBS = [("硬件工程师", "hardware engineer"), ("销售总监", "sales director"), ("产品经理", "product manager"),
        ("测试工程师", "test engineer"), ("财务经理", "finance manager"), ("设计师", "designer")]  # fmt: skip

# fmt: on


@dataclass
class Product:
    name: str
    facts: dict[str, str]  # attr key -> value text
    attrs: list[Attr]


@dataclass
class Company:
    name: str
    lang: str
    category: str
    products: list[Product] = field(default_factory=list)
    policies: dict[str, int] = field(default_factory=dict)
    benefits: dict[str, bool] = field(default_factory=dict)  # key -> provided?
    people: list[tuple[str, int, str, int, str]] = field(default_factory=list)  # name, job, city, year, uni
    roles: dict[str, str] = field(default_factory=dict)
    offices: list[tuple[str, str, int, int]] = field(default_factory=list)  # city, address, staff, opened
    shipments: dict[tuple[str, int, int], int] = field(default_factory=dict)  # (product, year, quarter) -> units


def _person(r: random.Random, lang: str) -> str:
    if lang == "zh":
        return r.choice(ZH_SURNAME) + r.choice(ZH_GIVEN)
    return f"{r.choice(EN_FIRST)} {r.choice(EN_LAST)}"


def _address(r: random.Random, lang: str, city: str) -> str:
    if lang == "zh":
        district = r.choice(["高新区", "滨江区", "经开区", "新城区"])
        return f"{city}市{district}{r.choice(['科创', '文华', '望江', '云锦'])}路 {r.randint(1, 999)} 号"
    street = r.choice(["Harbour", "Mill", "Station", "Park", "Bridge", "Market"])
    return f"{r.randint(1, 999)} {street} {r.choice(['Road', 'Street', 'Avenue'])}, {city}"


def _distinct(r: random.Random, lang: str, a: Attr, done: list[Product]) -> str:
    """A value of ``a`` no sibling product has: a sibling's passage then never states the asked value."""
    for _ in range(50):
        value = a.value(r, lang)
        if all(p.facts[a.key] != value for p in done):
            return value
    raise ValueError(f"cannot draw distinct values of {a.key}")


def make_company(r: random.Random, lang: str, used: set[str]) -> Company:
    category = r.choice(sorted(CATEGORIES))
    stems = ZH_STEMS if lang == "zh" else EN_STEMS
    if len(used) >= len(stems):
        raise ValueError(f"at most {len(stems)} templated companies per language")
    while True:  # one company per stem, so no two companies of a language share a name
        stem = r.choice(stems)
        if stem not in used:
            used.add(stem)
            break
    suffix = r.choice((ZH_SUFFIX if lang == "zh" else EN_SUFFIX)[category])
    c = Company(stem + suffix if lang == "zh" else f"{stem} {suffix}", lang, category)
    family = r.choice(ZH_FAMILY if lang == "zh" else EN_FAMILY)
    attrs = CATEGORIES[category][2]
    for model in r.sample(MODELS, 3):
        facts = {a.key: _distinct(r, lang, a, c.products) for a in attrs}
        c.products.append(Product(f"{family} {model}", facts, attrs))
    c.policies = {p[0]: p[5](r) for p in POLICIES}
    c.benefits = {b[0]: r.random() < 0.5 for b in BENEFITS}
    cities = r.sample(ZH_CITIES if lang == "zh" else EN_CITIES, 4)
    shared = _person(r, lang)  # two people of the company share this name
    names = [shared, shared, _person(r, lang), _person(r, lang)]
    jobs = r.sample(range(len(JOBS)), 4)
    unis = ZH_UNIS if lang == "zh" else EN_UNIS
    years = r.sample(range(2010, 2024), 4)  # the two namesakes never joined in the same year
    c.people = [(n, j, r.choice(cities), y, r.choice(unis)) for n, j, y in zip(names, jobs, years, strict=True)]
    leaders: list[str] = []
    while len(leaders) < len(ROLES):  # one person per role: a list without the CEO never names them
        name = _person(r, lang)
        if name not in leaders and name not in names:
            leaders.append(name)
    c.roles = dict(zip(ROLES, leaders, strict=True))
    c.offices = [(city, _address(r, lang, city), r.randrange(20, 600, 5), r.randint(2005, 2022)) for city in cities]
    for p in c.products:
        for year in (2022, 2023, 2024):
            for q in (1, 2, 3, 4):
                c.shipments[(p.name, year, q)] = r.randrange(800, 30000, 5)
    return c


def _label(company: Company, key: str) -> tuple[str, str]:
    for a in CATEGORIES[company.category][2]:
        if a.key == key:
            return a.zh, a.en
    raise KeyError(key)


@dataclass(frozen=True)
class Ask:
    """A question and what answers it, in the passages' language: the ``answer`` text, under ``field``
    (a column, an attribute label, a job or a role; "" when the answer is a whole sentence)."""

    query: str
    lang: str
    entity: str
    attribute: str
    answer: str
    field: str = ""


def pair(ask: Ask, passage: str, label: int, c: Company, miss: str = "", form: str = "") -> dict[str, Any]:
    """One pairs line; ``title`` is the company, so the trainer's validation split keeps a company whole.

    ``lang`` is the question's language, ``passage_lang`` the company's (the passages'); ``table_form``
    is how a table passage is written (``nearmiss_train_tables.FORMS``), "" for prose.
    """
    return {"query": ask.query, "passage": passage, "label": label, "lang": ask.lang, "passage_lang": c.lang,
            "source": "nearmiss-train", "kind": "positive" if label else "near_miss", "miss": miss, "title": c.name,
            "entity": ask.entity, "attribute": ask.attribute, "answer": ask.answer, "field": ask.field,
            "table_form": form}  # fmt: skip
