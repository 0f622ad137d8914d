"""The post a person holds, as company pages and organisation charts say it.

A biography defines its subject with "X (born 1984) is a hardware engineer" (:func:`crag.correct.names.define`);
a company's pages say who holds which post instead: "陈静于 2017 年加入青岚科技，现任首席财务官", "Wang Lei
joined in 2016 and is now the sales director", or a table row "负责人: 王磊（Wang Lei），首席硬件工程师". Read
as definitions, two people of one name with posts that share no word are two bearers
(:mod:`crag.correct.bearers`), and a question that names the post singles out its holder.

>>> post_of("陈静于 2017 年加入青岚科技，现任首席财务官，负责财务。", Name.of("陈静")).description
'首席财务官'
"""

from __future__ import annotations

import html
import re

from crag.correct.names import Definition, Name, en_description, same_name, zh_description
from crag.text import split_sentences, table_cells

__all__ = ["post_of", "row_post"]

# "…，现任首席财务官" / "… and is now the CFO": the post a person holds, said after the name.
_ZH_ROLE = re.compile(r"[^。；;]{0,40}?(?:现任|现为|担任|出任)(?P<desc>[^，,。；;、]{2,30})")
_EN_ROLE = re.compile(
    r"[^.;]{0,80}?\b(?:is\s+now|now\s+serves\s+as|serves\s+as|is\s+currently|currently\s+serves\s+as)\s+"
    r"(?P<desc>(?:a|an|the)\s+[^;.]{2,120})"
)
# A table cell naming a person and the post: "王磊（Wang Lei），首席硬件工程师", "Wang Lei, Chief Engineer".
_ROW_PERSON = re.compile(
    r"(?P<subj>[^（(，,;；]{2,40}?)\s*(?:[（(][^（）()]{0,60}[）)])?\s*[，,]\s*(?P<desc>[^，,;；]{2,60})$"
)


def post_of(text: str, name: Name) -> Definition | None:
    """The post ``text`` says ``name`` holds, in one of its first three sentences, or None."""
    for sentence in split_sentences(html.unescape(text))[:3]:
        found = _role(sentence.strip(), name)
        if found is not None:
            return found
    return None


def _role(sentence: str, name: Name) -> Definition | None:
    """A sentence that opens with ``name`` and says the post the person holds: "陈静于 2017 年加入
    青岚科技，现任首席财务官" or "Wang Lei joined in 2016 and now serves as the sales director".
    A company page introduces its people this way, not with "X is a …".

    >>> _role("陈静于 2017 年加入青岚科技，现任首席财务官，负责财务。", Name.of("陈静")).description
    '首席财务官'
    >>> en = "Wang Lei joined Kestrel Labs in 2016 and is now the sales director for southern China."
    >>> _role(en, Name.of("Wang Lei")).description
    'the sales director for southern China'
    """
    if name.cjk:
        if not sentence.startswith(name.text):
            return None
        m = _ZH_ROLE.match(sentence, len(name.text))
        desc = zh_description(m.group("desc")) if m else ""
    else:
        head = re.match(r"[^,;:.()]{2,80}?(?=\s*[,(]|\s+(?:is|was|has|had|joined|serves|now|currently)\b)", sentence)
        if head is None or not same_name(name, head.group(0)):
            return None
        m = _EN_ROLE.match(sentence, head.end())
        desc = en_description(m.group("desc")) if m else ""
    return Definition((), desc, "", sentence) if desc else None


def row_post(text: str, name: Name | None = None) -> tuple[Name, Definition] | None:
    """The person a table row's cell names with a post ("负责人: 王磊（Wang Lei），首席硬件工程师",
    "Lead: Wang Lei, Chief Hardware Engineer"), and that post as a definition; only ``name`` when given.

    An organisation chart lists its people as rows: two rows of one name with posts that share
    no word are two people, as two defining sentences would be.

    >>> found = row_post("电池与电源组 | 负责人: 王磊（Wang Lei），首席硬件工程师 | 所在地: 杭州")
    >>> found[0].text, found[1].description
    ('王磊', '首席硬件工程师')
    >>> row_post("Yunque S5 | Q3 2023 shipments: 8,640") is None
    True
    """
    cells = table_cells(text.strip())
    for _header, value in cells[1] if cells else []:
        m = _ROW_PERSON.match(value.strip())
        found = Name.of(m.group("subj")) if m else None
        if m is None or found is None or (name is not None and not same_name(name, m.group("subj"))):
            continue
        desc = zh_description(m.group("desc")) if found.cjk else en_description(m.group("desc"))
        if desc:
            return found, Definition((), desc, "", text.strip())
    return None
