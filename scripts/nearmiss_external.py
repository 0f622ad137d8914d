"""The external corpus of the near-miss set: invented news and web pages, written by hand.

Three roles (``metadata.role``):

* ``answer`` — holds what the internal documents lack (Qinglan's CEO, the Yunque S5's charging
  power, Kestrel's Series C, Larkspur's founding year, ...), in both languages;
* ``near_miss`` — about the same companies or a namesake company (Kestrel Aerospace, 青岚茶业),
  without the asked attribute: a CEO of the wrong Kestrel, a Series B instead of C, IPO plans
  without a date;
* ``distractor`` — other invented companies and general news.

Lines are ``{"id", "title", "text", "url", "metadata": {"lang", "company", "published", "role"}}``,
the JSONL the ``corpus`` search provider ingests. URLs use the reserved ``.example`` domain.
"""

from __future__ import annotations

from typing import Any

_ROWS: list[tuple[str, str, str, str, str, str, str]] = [
    # (id, lang, company, role, published, title, text)
    ("qinglan-ceo-zh", "zh", "qinglan", "answer", "2024-03-12", "青岚科技任命周明远为首席执行官",
     "苏州 3 月 12 日电 空气净化器制造商青岚科技今日宣布，董事会任命周明远为公司首席执行官，自 4 月 1 日起生效。"
     "周明远此前担任一家家电企业的中国区总裁。创始人赵启明将继续担任董事长，专注于公司战略和研发投入。"),
    ("qinglan-ceo-en", "en", "qinglan", "answer", "2024-03-12",
     "Qinglan Technology appoints Zhou Mingyuan as chief executive",
     "SUZHOU, March 12, 2024. Qinglan Technology, the maker of the AP series of air purifiers, said its board has "
     "appointed Zhou Mingyuan (周明远) as chief executive officer from April 1. Founder Zhao Qiming remains "
     "chairman. Zhou previously ran the China business of a home appliance group."),
    ("yunque-s5-review-en", "en", "kestrel", "answer", "2023-05-20", "Yunque S5 review: two days on a charge",
     "Kestrel Labs' Yunque S5 is a light phone with a big battery. In our tests it lasted almost two days of "
     "normal use. It supports 45 W wired charging and reached 50% in 22 minutes with the charger in the box; "
     "there is no wireless charging. The 6.7-inch OLED screen is bright enough outdoors."),
    ("yunque-s5-review-zh", "zh", "kestrel", "answer", "2023-05-22", "云雀 S5 上手：轻薄机身里的长续航",
     "红隼实验室（Kestrel Labs）的云雀 S5 机身轻薄，续航表现出色，正常使用接近两天。它支持 45 瓦有线快充，"
     "使用原装充电器 22 分钟可充至 50%，但不支持无线充电。"),
    ("kestrel-series-c-zh", "zh", "kestrel", "answer", "2022-08-30", "红隼实验室完成 6 亿元 C 轮融资",
     "杭州手机厂商红隼实验室（Kestrel Labs）宣布完成 6 亿元人民币 C 轮融资，由远川资本领投，老股东继续跟投。"
     "本轮资金将用于云雀系列新机研发和海外渠道建设。"),
    ("kestrel-series-c-en", "en", "kestrel", "answer", "2022-08-31", "Kestrel Labs raises 600 million yuan",
     "Hangzhou phone maker Kestrel Labs has closed a Series C round of 600 million yuan, led by Yuanchuan "
     "Capital. The money will fund new Yunque phones and sales outside China."),
    ("kestrel-patents-en", "en", "kestrel", "answer", "2024-04-26", "Kestrel Labs passes 300 patents",
     "Kestrel Labs now holds 312 granted patents, most of them on battery management and antenna design, the "
     "company said on World Intellectual Property Day."),
    ("kestrel-patents-zh", "zh", "kestrel", "answer", "2024-04-26", "红隼实验室授权专利超过 300 件",
     "在世界知识产权日，红隼实验室表示，公司已获授权专利 312 件，主要集中在电池管理和天线设计领域。"),
    ("larkspur-profile-en", "en", "larkspur", "answer", "2023-02-14", "Larkspur Mobility: from a garage to three "
     "continents",
     "Larkspur Mobility was founded in 2011 in Portland by industrial designer Owen Pryce, who built the first "
     "scooter prototypes in a rented garage. The company now sells in North America, Europe and Asia."),
    ("larkspur-profile-zh", "zh", "larkspur", "answer", "2023-03-02", "Larkspur Mobility：从车库到三大洲",
     "Larkspur Mobility 于 2011 年由工业设计师欧文·普赖斯（Owen Pryce）在美国波特兰创立，最早的滑板车原型是在"
     "一间租来的车库里做出来的。"),
    ("glide2-recall-en", "en", "larkspur", "answer", "2024-05-14", "Larkspur recalls Glide 2 scooters",
     "Larkspur Mobility is recalling 3,200 Glide 2 kick scooters sold between January and March 2024 because "
     "the folding latch can loosen. Owners can get a free replacement latch from dealers."),
    ("glide2-recall-zh", "zh", "larkspur", "answer", "2024-05-15", "Larkspur 召回 Glide 2 滑板车",
     "Larkspur Mobility 宣布召回 2024 年 1 月至 3 月售出的 3200 辆 Glide 2 滑板车，原因是折叠锁扣可能松动。"
     "车主可到经销商免费更换锁扣。"),
    ("ap9-award-zh", "zh", "qinglan", "answer", "2023-12-05", "青岚 AP9 获金鸢工业设计奖",
     "2023 年度金鸢工业设计奖揭晓，青岚科技的 AP9 空气净化器凭借竖向风道和可回收外壳获得家电类金奖。"),
    ("ap9-award-en", "en", "qinglan", "answer", "2023-12-06", "Qinglan AP9 wins Golden Kite design award",
     "Qinglan Technology's AP9 air purifier won the gold prize for home appliances at the 2023 Golden Kite "
     "industrial design awards, praised for its vertical air duct and recyclable housing."),
    ("larkspur-brno-en", "en", "larkspur", "answer", "2024-06-18", "Larkspur to assemble e-bikes in Europe",
     "Larkspur Mobility will open a European assembly plant in Brno, Czech Republic, in 2025, to build Ridge and "
     "Metro e-bikes for European dealers closer to the Rotterdam warehouse."),
    ("larkspur-brno-zh", "zh", "larkspur", "answer", "2024-06-19", "Larkspur 将在捷克设立欧洲组装厂",
     "Larkspur Mobility 计划 2025 年在捷克布尔诺（Brno）开设欧洲组装厂，为欧洲经销商组装 Ridge 和 Metro 电动"
     "自行车。"),
    # -- near misses: the same companies, or a namesake, without the asked attribute ------------------
    ("kestrel-aerospace-ceo", "en", "kestrel-aerospace", "near_miss", "2024-02-08",
     "Kestrel Aerospace names Henrik Dahl CEO",
     "Kestrel Aerospace, the Norwegian maker of inspection drones, has named Henrik Dahl chief executive. Dahl "
     "was previously head of engineering. Kestrel Aerospace is not related to the Chinese phone maker Kestrel "
     "Labs."),
    ("kestrel-chengdu-zh", "zh", "kestrel", "near_miss", "2023-11-02", "红隼实验室成都客服中心扩招",
     "红隼实验室（Kestrel Labs）成都客服中心近日启动扩招，计划新增客服和测试岗位。公司发言人表示，成都团队目前"
     "有 65 人，主要负责云雀系列手机的售后服务。"),
    ("kestrel-sea-en", "en", "kestrel", "near_miss", "2023-09-12", "Kestrel Labs takes the Yunque S5 to Southeast "
     "Asia",
     "Kestrel Labs will sell the Yunque S5 in Malaysia, Thailand and Vietnam from October, its first phone "
     "launch outside China. A company spokesperson said prices would be announced locally."),
    ("kestrel-series-b-zh", "zh", "kestrel", "near_miss", "2019-06-18", "红隼实验室获 2 亿元 B 轮融资",
     "红隼实验室（Kestrel Labs）宣布完成 2 亿元人民币 B 轮融资，资金将用于扩大杭州研发团队。"),
    ("kestrel-buds-en", "en", "kestrel", "near_miss", "2023-12-01", "Kestrel Buds hit a holiday high",
     "Kestrel Labs said its Kestrel Buds earbuds had their best quarter yet at the end of 2023, helped by "
     "online shopping festivals. The company did not comment on its phone sales."),
    ("qinglan-ipo-zh", "zh", "qinglan", "near_miss", "2023-11-20", "青岚科技拟启动上市辅导",
     "据知情人士透露，空气净化器厂商青岚科技正在与券商接触，拟启动上市辅导。董事长赵启明在内部会议上表示，"
     "公司将继续加大研发投入。青岚科技未回应上市时间表。"),
    ("qinglan-tea-en", "en", "qinglan-tea", "near_miss", "2024-01-15", "Qinglan Tea opens flagship store",
     "Qinglan Tea (青岚茶业), a tea retailer from Hangzhou, opened a flagship store in Shanghai. General manager "
     "Luo Wen said the company plans 20 more stores. Qinglan Tea is unrelated to the air purifier maker "
     "Qinglan Technology."),
    ("qinglan-tea-zh", "zh", "qinglan-tea", "near_miss", "2024-01-15", "青岚茶业上海旗舰店开业",
     "杭州茶叶零售品牌青岚茶业在上海开设旗舰店，总经理罗文表示明年将新开 20 家门店。"),
    ("qinglan-market-en", "en", "qinglan", "near_miss", "2024-02-27", "Air purifier sales rise after a smoggy "
     "winter",
     "Air purifier sales in China rose 18% this winter. Qinglan Technology's AP7 was among the ten best "
     "sellers on major e-commerce platforms, according to a market tracker."),
    ("ap9-review-zh", "zh", "qinglan", "near_miss", "2023-11-08", "青岚 AP9 体验：大房间也够用",
     "青岚 AP9 的洁净空气量为每小时 600 立方米，适合客厅和开放式办公区，睡眠档几乎听不到声音。"),
    ("glide2-review-en", "en", "larkspur", "near_miss", "2022-05-03", "Larkspur Glide 2 review",
     "The Larkspur Glide 2 weighs 14.2 kg and folds in two seconds. Its 45 km range is enough for a week of "
     "short commutes. The ride is firm on cobbles."),
    ("larkspur-series-b-en", "en", "larkspur", "near_miss", "2021-09-09", "Larkspur raises $40 million",
     "Portland-based Larkspur Mobility raised $40 million in a Series B round to expand in Europe. Chief "
     "executive Priya Natarajan said the money would fund a warehouse in Rotterdam."),
    ("larkspur-rotterdam-zh", "zh", "larkspur", "near_miss", "2020-10-21", "Larkspur 鹿特丹仓库启用",
     "Larkspur Mobility 在荷兰鹿特丹的仓库和办公室正式启用，负责欧洲市场的配送和售后。"),
    # -- distractors: other invented companies and general news ----------------------------------------
    ("bluefin-ceo-en", "en", "bluefin", "distractor", "2024-03-01", "Bluefin Audio appoints new CEO",
     "Bluefin Audio, a headphone maker in Austin, appointed Carla Mendes as chief executive. Bluefin ships "
     "about 200,000 headphones a year."),
    ("haichuan-zh", "zh", "haichuan", "distractor", "2024-04-10", "海川电器发布新款除湿机",
     "海川电器发布新款除湿机 D20，日除湿量 20 升，建议零售价 1599 元。"),
    ("ebike-standard-zh", "zh", "", "distractor", "2024-05-08", "电动自行车新国标要点",
     "电动自行车新国标要求最高设计车速不超过每小时 25 公里，整车质量（含电池）不超过 55 千克。"),
    ("phone-market-en", "en", "", "distractor", "2024-07-30", "China smartphone shipments grow in Q2 2024",
     "Smartphone shipments in China grew 8% year on year in the second quarter of 2024, a market research "
     "firm said. Mid-range phones sold best."),
    ("ember-robotics-en", "en", "ember", "distractor", "2023-10-10", "Ember Robotics launches a window cleaner",
     "Ember Robotics launched the W2 window-cleaning robot with a 2,800 mAh battery and a safety rope."),
    ("mingquan-zh", "zh", "mingquan", "distractor", "2024-02-02", "鸣泉智能发布年报",
     "鸣泉智能 2023 年营业收入 12.6 亿元，同比增长 15%。公司首席执行官韩立表示将加大海外投入。"),
]  # fmt: skip


def external_corpus() -> list[dict[str, Any]]:
    """The corpus lines, in a fixed order."""
    out = []
    for pid, lang, company, role, published, title, text in _ROWS:
        out.append({
            "id": f"ext-{pid}",
            "title": title,
            "text": text,
            "url": f"https://news.example/{published[:4]}/{pid}",
            "metadata": {"lang": lang, "company": company, "published": published, "role": role},
        })  # fmt: skip
    return out
