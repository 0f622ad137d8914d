"""Words that state the same relation: 成立 and 创办, "founded" and "established".

A question and the passage that answers it often name the relation with different words
("青岚科技成立于哪一年？" / "他于 2012 年在苏州创办青岚科技"). Lexical graders and the claim check
count a question word as present only when the passage writes it, so the answering passage
looked like a near miss. The groups here are exact synonyms of the relations company, product
and biography documents state; a looser word ("started", 开始) is left out on purpose, since a
synonym that is not one would let a near miss pass.

>>> synonyms("成立")
('创办', '创立', '创建', '建立', '创设')
>>> align({"founded"}, "The firm was established in 2014 by Lin Qiao.")
'The firm was founded in 2014 by Lin Qiao.'
>>> align({"成立"}, "他于 2012 年在苏州创办青岚科技")
'他于 2012 年在苏州成立青岚科技'
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

__all__ = ["SLOTS", "align", "synonyms"]

# One group per line; forms separated by "/". Each group is one relation, in one language:
# cross-language matches are the embedder's job, not this table's.
_GROUPS = """
成立/创办/创立/创建/建立/创设
创始人/创办人/创立者/创建者
位于/坐落/地处
员工/雇员/职工
员工人数/员工数/雇员人数/职工人数
总部/总公司
售价/价格/定价
出生/生于/出生于
去世/逝世/病逝/离世
营收/营业收入/营业额/收入/销售额
净利润/利润/盈利
收购/并购
续航/续航时间
居住/栖居/栖息
收录/收有
founded/established
founder/co-founder
headquarters/headquartered/head office
employees/staff/workforce/headcount
price/priced/costs/cost
born/birth
died/death
revenue/revenues/sales/turnover
profit/profits/earnings/net income
acquired/bought/purchased
acquisition/purchase
located/situated
ceo/chief executive/chief executive officer
cfo/chief financial officer
cto/chief technology officer
"""

# The slot a question asks to fill, which an answer names rather than writes: "What is its name?"
# is answered by a name, "在什么地方" by a place, "What is X's occupation?" by "a politician",
# "地址是哪里" by a street. No source writes 名字, 地方, "occupation" or 地址, so none is a relation
# word the claim check asks a source for, nor a focus word the evaluator looks up.
SLOTS = frozenset(
    """name names kind kinds type types sort thing things term terms entity example way called 名字 名称 叫 叫做
    称为 地方 哪里 东西 类型 种类 一种 两个 几个 哪家 哪些 哪个 哪所 哪一年 哪年 最终
    occupation occupations profession professions job jobs 职业 address addresses 地址 性质""".split()
)

_TABLE: dict[str, tuple[str, ...]] = {}
for _line in _GROUPS.strip().splitlines():
    _forms = [f.strip() for f in _line.split("/") if f.strip()]
    for _form in _forms:
        _TABLE[_form] = tuple(f for f in _forms if f != _form)


def synonyms(term: str) -> tuple[str, ...]:
    """The other words of ``term``'s group (lower-case for English); () when it has none."""
    return _TABLE.get(term.lower() if term.isascii() else term, ())


def align(terms: Iterable[str], text: str) -> str:
    """``text`` with each synonym of a question term written as that term, so word-counting
    features see the relation the passage states. Terms without synonyms change nothing.

    Only for grading features: the text shown to a reader or the model is never rewritten.
    """
    for term in terms:
        others = synonyms(term)
        if others:
            text = _pattern(others).sub(term, text)
    return text


@lru_cache(maxsize=512)
def _pattern(forms: tuple[str, ...]) -> re.Pattern[str]:
    # Longest first so "chief executive officer" is replaced whole; English forms are whole
    # words ("cost" is not in "costume"), Chinese ones are substrings (no spaces to bound them).
    parts = []
    for form in sorted(forms, key=len, reverse=True):
        escaped = re.escape(form)
        parts.append(rf"\b{escaped}\b" if form.isascii() else escaped)
    return re.compile("|".join(parts), re.I)
