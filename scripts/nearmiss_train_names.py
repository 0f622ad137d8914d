"""Names of the templated training companies as the other language writes them.

A question is sometimes asked in the other language than the documents that answer it ("What is
the Xinghe X2's battery capacity?" over a Chinese spec table of 星河 X2), as a bilingual user
asks. Chinese names are romanised the way Chinese companies and people write themselves in
English (pinyin, family name first: 张伟 → Zhang Wei, 云帆科技 → Yunfan Technology, 星河 X2 →
Xinghe X2); English company, product and person names stay as written in a Chinese question (as
"Larkspur Glide 2 有多重？" does), and English cities get their usual Chinese names.

>>> in_lang("云帆科技", "zh", "en"), in_lang("星河 X2", "zh", "en"), in_lang("张伟", "zh", "en")
('Yunfan Technology', 'Xinghe X2', 'Zhang Wei')
>>> in_lang("Austin", "en", "zh"), in_lang("Bluefin Labs", "en", "zh")
('奥斯汀', 'Bluefin Labs')
"""

from __future__ import annotations

import re

from nearmiss_train import EN_CITIES, ZH_CITIES, ZH_FAMILY, ZH_GIVEN, ZH_STEMS, ZH_SUFFIX, ZH_SURNAME

# fmt: off
STEMS_EN = {"云帆": "Yunfan", "星途": "Xingtu", "海川": "Haichuan", "远岫": "Yuanxiu", "松涛": "Songtao",
            "锦程": "Jincheng", "明湖": "Minghu", "青石": "Qingshi", "白鹭": "Bailu", "赤松": "Chisong",
            "墨竹": "Mozhu", "朗月": "Langyue", "清溪": "Qingxi", "蓝鲸": "Lanjing", "金穗": "Jinsui",
            "银杏": "Yinxing", "丹霞": "Danxia", "飞羽": "Feiyu", "长风": "Changfeng", "观澜": "Guanlan",
            "晴川": "Qingchuan", "知行": "Zhixing", "启明": "Qiming", "拓野": "Tuoye", "若水": "Ruoshui",
            "凌云": "Lingyun", "沐光": "Muguang", "南山": "Nanshan", "北辰": "Beichen", "东篱": "Dongli",
            "西岭": "Xiling", "星火": "Xinghuo"}
SUFFIX_EN = {"科技": "Technology", "电子": "Electronics", "数码": "Digital", "声学": "Acoustics",
             "电器": "Appliances", "智能": "Smart", "环境": "Environmental", "智造": "Manufacturing",
             "出行": "Mobility", "车业": "Vehicles"}
FAMILY_EN = {"星河": "Xinghe", "晨曦": "Chenxi", "雪松": "Xuesong", "海燕": "Haiyan", "流光": "Liuguang",
             "青竹": "Qingzhu", "赤焰": "Chiyan", "墨玉": "Moyu", "琥珀": "Hupo", "极光": "Jiguang",
             "远山": "Yuanshan", "秋水": "Qiushui", "白桦": "Baihua", "松月": "Songyue", "苍穹": "Cangqiong",
             "鲸歌": "Jingge"}
SURNAME_EN = {"张": "Zhang", "李": "Li", "刘": "Liu", "杨": "Yang", "赵": "Zhao", "黄": "Huang", "周": "Zhou",
              "吴": "Wu", "徐": "Xu", "孙": "Sun", "胡": "Hu", "朱": "Zhu", "高": "Gao", "林": "Lin", "何": "He",
              "郭": "Guo", "马": "Ma", "罗": "Luo"}
GIVEN_EN = {"伟": "Wei", "芳": "Fang", "敏": "Min", "强": "Qiang", "洋": "Yang", "艳": "Yan", "杰": "Jie",
            "涛": "Tao", "明": "Ming", "超": "Chao", "秀兰": "Xiulan", "霞": "Xia", "平": "Ping", "刚": "Gang",
            "桂英": "Guiying", "建华": "Jianhua", "晓东": "Xiaodong", "海燕": "Haiyan", "志强": "Zhiqiang",
            "丽娟": "Lijuan", "俊杰": "Junjie", "雨桐": "Yutong", "子轩": "Zixuan", "思远": "Siyuan"}
CITIES_EN = {"北京": "Beijing", "上海": "Shanghai", "广州": "Guangzhou", "武汉": "Wuhan", "南京": "Nanjing",
             "西安": "Xi'an", "长沙": "Changsha", "厦门": "Xiamen", "青岛": "Qingdao", "合肥": "Hefei",
             "天津": "Tianjin", "重庆": "Chongqing"}
CITIES_ZH = {"Austin": "奥斯汀", "Denver": "丹佛", "Boston": "波士顿", "Dublin": "都柏林", "Lyon": "里昂",
             "Munich": "慕尼黑", "Oslo": "奥斯陆", "Seoul": "首尔", "Toronto": "多伦多", "Valencia": "瓦伦西亚",
             "Krakow": "克拉科夫", "Melbourne": "墨尔本"}
# fmt: on

# Every name a company can draw has its other-language form (a missing one fails the build, not a question).
_ZH_SUFFIXES = {s for suffixes in ZH_SUFFIX.values() for s in suffixes}
for _pool, _names in ((ZH_STEMS, STEMS_EN), (ZH_FAMILY, FAMILY_EN), (ZH_SURNAME, SURNAME_EN), (ZH_GIVEN, GIVEN_EN),
                      (ZH_CITIES, CITIES_EN), (EN_CITIES, CITIES_ZH), (_ZH_SUFFIXES, SUFFIX_EN)):  # fmt: skip
    if set(_pool) - set(_names):
        raise ValueError(f"no other-language name for {sorted(set(_pool) - set(_names))}")


def other(lang: str) -> str:
    return "en" if lang == "zh" else "zh"


def in_lang(name: str, src: str, lang: str) -> str:
    """``name`` (a company, product, person or city of the pools, written in ``src``) as ``lang`` writes it."""
    if src == lang:
        return name
    if src == "en":
        return CITIES_ZH.get(name, name)
    if name in CITIES_EN:
        return CITIES_EN[name]
    family, space, model = name.partition(" ")
    if space and family in FAMILY_EN:
        return f"{FAMILY_EN[family]} {model}"
    stem, suffix = name[:2], name[2:]
    if stem in STEMS_EN and suffix in SUFFIX_EN:
        return f"{STEMS_EN[stem]} {SUFFIX_EN[suffix]}"
    if name[:1] in SURNAME_EN and name[1:] in GIVEN_EN:
        return f"{SURNAME_EN[name[:1]]} {GIVEN_EN[name[1:]]}"
    raise KeyError(f"no English form of {name!r}")


def zh_name(name: str) -> str:
    """A name to set in Chinese text: a Latin name gets a space on its Latin side ("的 Aria X2 在")."""
    left = " " if name[:1].isascii() else ""
    right = " " if name[-1:].isascii() else ""
    return f"{left}{name}{right}"


def tidy(question: str) -> str:
    """A question without the doubled or edge spaces ``zh_name`` can leave."""
    return re.sub(r" {2,}", " ", question).strip()
