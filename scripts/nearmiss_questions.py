"""The questions of the near-miss set, written by hand against ``nearmiss_docs`` and ``nearmiss_external``.

Kinds: ``unanswerable`` (no document and no corpus passage holds the answer, but they hold the
same entity with another attribute, the same table for another period, a role nobody is named
for, or nothing at all on a yes/no topic), ``table`` (a table cell answers), ``external`` (only
the external corpus answers), ``text`` (a sentence answers), ``namesake`` (a shared name: the
answer must describe every bearer, so it must contain every string of ``answers``).

Each entry: (lang, kind, question, answers, source, extra). ``source`` is the file (relative to
``data/nearmiss``) or external id that holds the answer, or, for an unanswerable question, the
near miss it is built on. ``extra`` may set ``miss`` (how an unanswerable question is close),
``distractors`` (values near by that do not answer it), ``cross_lingual`` (the answer is only
in a document of the other language) and ``case`` (one of the four cases of the report).
"""

from __future__ import annotations

from typing import Any

KD = "kestrel/"
QG = "internal/qinglan/"
LS = "internal/larkspur/"

Row = tuple[str, str, str, list[str], str, dict[str, Any]]

_X = {"cross_lingual": True}


def _u(miss: str, *distractors: str, **more: Any) -> dict[str, Any]:
    return {"miss": miss, "distractors": list(distractors), **more}


UNANSWERABLE: list[Row] = [
    ("en", "unanswerable", "Who is the CEO of Kestrel Labs?", [], KD + "about-kestrel-labs.md",
     _u("unnamed_role", "Wang Lei", "Lin Qiao", "Marcus Hale", "Henrik Dahl", case="ceo")),
    ("zh", "unanswerable", "红隼实验室的首席执行官是谁？", [], KD + "组织架构.md",
     _u("unnamed_role", "王磊", "Wang Lei", "Lin Qiao", "孙启航", "Henrik Dahl", case="ceo")),
    ("en", "unanswerable", "Does Kestrel Labs give employees a company car?", [], KD + "employee-handbook.md",
     _u("silent", case="car")),
    ("zh", "unanswerable", "红隼实验室会给员工配公司车吗？", [], KD + "福利补充说明.md", _u("silent", case="car")),
    ("en", "unanswerable", "How many Yunque S3 phones did Kestrel Labs ship in Q4 2022?", [],
     KD + "shipments-by-quarter.md", _u("other_period", "5,902", "4,880")),
    ("zh", "unanswerable", "云雀 S3 在 2022 年第四季度出货了多少台？", [], KD + "shipments-by-quarter.md",
     _u("other_period", "5,902", "4,880")),
    ("en", "unanswerable", "What is the screen refresh rate of the Yunque S5?", [], KD + "云雀S5产品规格.md",
     _u("other_attribute", "2400")),
    ("zh", "unanswerable", "云雀 S5 的屏幕刷新率是多少？", [], KD + "云雀S5产品规格.md", _u("other_attribute", "2400")),
    ("en", "unanswerable", "How many days of paternity leave do Kestrel Labs employees get?", [],
     KD + "福利补充说明.md", _u("other_attribute", "158", "10 days")),
    ("zh", "unanswerable", "红隼实验室的陪产假有几天？", [],
     KD + "福利补充说明.md", _u("other_attribute", "158", "10 天")),
    ("en", "unanswerable", "Does Kestrel Labs offer stock options to employees?", [], KD + "employee-handbook.md",
     _u("silent")),
    ("zh", "unanswerable", "红隼实验室给员工发股票期权吗？", [], KD + "employee-handbook.md", _u("silent")),
    ("en", "unanswerable", "Which university did Wang Lei, the hardware engineer at Kestrel Labs, graduate from?",
     [], KD + "people/wang-lei-engineer.md", _u("other_attribute", "Suzhou")),
    ("zh", "unanswerable", "红隼实验室首席硬件工程师王磊毕业于哪所大学？", [], KD + "people/wang-lei-engineer.md",
     _u("other_attribute", "苏州", "Suzhou")),
    ("en", "unanswerable", "When did Kestrel Labs open its Chengdu office?", [], KD + "offices.html",
     _u("other_attribute", "2014")),
    ("zh", "unanswerable", "红隼实验室成都办公室是哪一年启用的？", [],
     KD + "offices.html", _u("other_attribute", "2014")),
    ("en", "unanswerable", "What is the battery capacity of the Yunque Lite?", [], KD + "云雀S5产品规格.md",
     _u("other_entity", "5200", "5,200")),
    ("zh", "unanswerable", "云雀 Lite 的电池容量是多少？", [], KD + "云雀S5产品规格.md", _u("other_entity", "5200")),
    ("en", "unanswerable", "What is the hotel limit for Kestrel Labs employees on trips abroad?", [],
     KD + "差旅报销政策.md", _u("other_attribute", "600", "450", "350")),
    ("zh", "unanswerable", "红隼实验室员工出国出差每晚住宿上限是多少？", [], KD + "差旅报销政策.md",
     _u("other_attribute", "600", "450", "350")),
    ("en", "unanswerable", "How long is the warranty on the Yunque S5?", [], KD + "云雀S5产品规格.md",
     _u("other_attribute")),
    ("zh", "unanswerable", "云雀 S5 的保修期是多久？", [], KD + "云雀S5产品规格.md", _u("other_attribute")),
    ("en", "unanswerable", "How long does the filter of the Qinglan AP7 last?", [], QG + "AP9-spec-sheet.md",
     _u("other_entity", "12 months")),
    ("zh", "unanswerable", "青岚 AP7 的滤网多久需要更换？", [], QG + "AP9-spec-sheet.md",
     _u("other_entity", "12 个月", "12 months")),
    ("en", "unanswerable", "How many R3 robot vacuums did Qinglan ship in Q1 2022?", [], QG + "季度出货量.docx",
     _u("other_period", "11,200")),
    ("zh", "unanswerable", "青岚 R3 在 2022 年第一季度出货多少台？", [], QG + "季度出货量.docx",
     _u("other_period", "11,200")),
    ("en", "unanswerable", "How many months of salary is Qinglan Technology's year-end bonus?", [],
     QG + "员工手册.md", _u("other_entity", "1.5")),
    ("zh", "unanswerable", "青岚科技的年终奖是几个月工资？", [], QG + "员工手册.md", _u("other_entity", "1.5")),
    ("en", "unanswerable", "Which university did Qinglan Technology's CFO graduate from?", [], QG + "管理团队.md",
     _u("namesake_attribute", "Nanjing University of Science and Technology", "南京理工大学")),
    ("zh", "unanswerable", "青岚科技首席财务官陈静毕业于哪所大学？", [], QG + "管理团队.md",
     _u("namesake_attribute", "南京理工大学")),
    ("en", "unanswerable", "Does Qinglan Technology run a shuttle bus for employees?", [], QG + "员工手册.md",
     _u("silent")),
    ("zh", "unanswerable", "青岚科技有员工通勤班车吗？", [], QG + "员工手册.md", _u("silent")),
    ("en", "unanswerable", "What is the battery capacity of the Qinglan R3 robot vacuum?", [], QG + "产品目录.html",
     _u("other_attribute", "150", "4000")),
    ("zh", "unanswerable", "青岚 R3 扫地机器人的电池容量是多少？", [], QG + "产品目录.html",
     _u("other_attribute", "150", "4000")),
    ("en", "unanswerable", "What is Qinglan Technology's hotel limit on business trips?", [], QG + "费用报销制度.md",
     _u("other_attribute", "150", "300")),
    ("zh", "unanswerable", "青岚科技员工出差的住宿标准是多少？", [], QG + "费用报销制度.md",
     _u("other_attribute", "150", "300")),
    ("en", "unanswerable", "When does Qinglan Technology plan to go public?", [], "ext-qinglan-ipo-zh",
     _u("other_attribute")),
    ("zh", "unanswerable", "青岚科技计划什么时候 IPO？", [], "ext-qinglan-ipo-zh", _u("other_attribute")),
    ("en", "unanswerable", "How long does the Larkspur Metro 3 take to charge?", [], LS + "Ridge规格书.docx",
     _u("other_entity", "5.5")),
    ("zh", "unanswerable", "Larkspur Metro 3 充满电需要多长时间？", [], LS + "Ridge规格书.docx",
     _u("other_entity", "5.5")),
    ("en", "unanswerable", "How many Ridge e-bikes did Larkspur ship in Q3 2024?", [], LS + "shipments.html",
     _u("other_period", "3,905", "1,260")),
    ("zh", "unanswerable", "Larkspur Ridge 在 2024 年第三季度出货多少辆？", [], LS + "shipments.html",
     _u("other_period", "3,905", "1,260")),
    ("en", "unanswerable", "Who is the CTO of Larkspur Mobility?", [], LS + "leadership.md",
     _u("unnamed_role", "Priya Natarajan", "Tomás Lindqvist", "Helen Cho", "Owen Pryce")),
    ("zh", "unanswerable", "Larkspur Mobility 的首席技术官是谁？", [], LS + "leadership.md",
     _u("unnamed_role", "Priya Natarajan", "Tomás Lindqvist", "Helen Cho", "Owen Pryce")),
    ("en", "unanswerable", "Does Larkspur Mobility give employees a company car?", [], LS + "employee-handbook.md",
     _u("silent")),
    ("zh", "unanswerable", "Larkspur Mobility 给员工配公司车吗？", [], LS + "employee-handbook.md", _u("silent")),
    ("en", "unanswerable", "Does the Larkspur warranty pass to a second owner?", [], LS + "warranty-terms.pdf",
     _u("silent")),
    ("zh", "unanswerable", "Larkspur 的保修可以转给二手车主吗？", [], LS + "warranty-terms.pdf", _u("silent")),
    ("en", "unanswerable", "What is the maximum torque of the Larkspur Ridge motor?", [], LS + "Ridge规格书.docx",
     _u("other_attribute", "250")),
    ("zh", "unanswerable", "Larkspur Ridge 电机的最大扭矩是多少？", [], LS + "Ridge规格书.docx",
     _u("other_attribute", "250")),
]  # fmt: skip

TABLE: list[Row] = [
    ("en", "table", "How many Yunque S5 units did Kestrel Labs ship in Q3 2023?", ["8,640", "8640"],
     KD + "shipments-by-quarter.md", {}),
    ("zh", "table", "云雀 S5 在 2023 年第三季度出货了多少台？", ["8,640", "8640"], KD + "shipments-by-quarter.md", _X),
    ("en", "table", "What is the Yunque S5 battery capacity?",
     ["5200 mAh", "5,200 mAh", "5200毫安时", "5200", "5,200"], KD + "云雀S5产品规格.md",
     {"cross_lingual": True, "case": "battery", "distractors": ["8,640", "8640"]}),
    ("zh", "table", "云雀 S5 的电池容量是多少？", ["5200毫安时", "5200 mAh", "5200", "5,200"], KD + "云雀S5产品规格.md",
     {"case": "battery", "distractors": ["8,640", "8640"]}),
    ("en", "table", "How many Kestrel Buds did Kestrel Labs ship in Q4 2023?", ["21,470", "21470"],
     KD + "shipments-by-quarter.md", {}),
    ("zh", "table", "云雀 S3 在 2024 年第一季度出货了多少台？", ["5,310", "5310"], KD + "shipments-by-quarter.md", _X),
    ("en", "table", "How much does the Yunque Lite cost?", ["1299", "1,299"], KD + "价格表.docx", _X),
    ("zh", "table", "云雀 S5 12GB + 512GB 版本的建议零售价是多少？", ["3499", "3,499"], KD + "价格表.docx", {}),
    ("en", "table", "How many people work in Kestrel Labs' Shenzhen office?", ["95"], KD + "offices.html", {}),
    ("zh", "table", "红隼实验室杭州总部有多少员工？", ["260"], KD + "offices.html", _X),
    ("en", "table", "What is the address of Kestrel Labs' Chengdu office?", ["88 Tianfu Third Street"],
     KD + "offices.html", {}),
    ("zh", "table", "红隼实验室员工去深圳出差，每晚住宿上限是多少？", ["600元", "600 元", "600"],
     KD + "差旅报销政策.md", {}),
    ("en", "table", "What is the nightly hotel limit for Kestrel Labs employees travelling to a provincial capital?",
     ["450"], KD + "差旅报销政策.md", _X),
    ("zh", "table", "谁负责红隼实验室的软件事业部？", ["郑雅文"], KD + "组织架构.md", {}),
    ("en", "table", "Who heads the software division of Kestrel Labs?", ["郑雅文", "Zheng Yawen"],
     KD + "组织架构.md", _X),
    ("zh", "table", "云雀 S5 有哪些颜色？", ["曜石黑", "雾松绿", "月光白"], KD + "云雀S5产品规格.md", {}),
    ("en", "table", "How heavy is the Yunque S5?", ["198 g", "198 grams", "198克", "198 克"],
     KD + "云雀S5产品规格.md", _X),
    ("zh", "table", "青岚 AP9 的洁净空气量（CADR）是多少？", ["600 立方米/小时", "600立方米", "600 m³/h", "600"],
     QG + "产品目录.html", {}),
    ("en", "table", "What is the CADR of the Qinglan AP9?", ["600 m³/h", "600 立方米", "600"],
     QG + "AP9-spec-sheet.md", {}),
    ("zh", "table", "青岚 AP7 的建议零售价是多少？", ["1999", "1,999"], QG + "产品目录.html", {}),
    ("en", "table", "How long does the filter of the Qinglan AP9 last?",
     ["12 months", "12 个月", "12个月", "one year", "a year"], QG + "AP9-spec-sheet.md", {}),
    ("zh", "table", "青岚 AP9 的滤网寿命是多久？", ["12 个月", "12个月", "一年", "12 months"],
     QG + "AP9-spec-sheet.md", _X),
    ("en", "table", "How many R3 robot vacuums did Qinglan ship in Q2 2024?", ["12,450", "12450"],
     QG + "季度出货量.docx", _X),
    ("zh", "table", "青岚 AP9 在 2023 年第四季度出货多少台？", ["7,180", "7180"], QG + "季度出货量.docx", {}),
    ("en", "table", "How many employees work at Qinglan Technology's Suzhou headquarters?", ["540"],
     QG + "办公地点.md", _X),
    ("zh", "table", "青岚科技深圳研发中心是哪一年启用的？", ["2018"], QG + "办公地点.md", {}),
    ("zh", "table", "青岚科技成都客服中心的地址是什么？", ["天府大道北段 966 号", "天府大道北段966号"],
     QG + "办公地点.md", {}),
    ("en", "table", "How loud is the Qinglan AP7 in sleep mode?", ["26 分贝", "26 dB", "26 decibels"],
     QG + "产品目录.html", _X),
    ("en", "table", "What is the range of the Larkspur Ridge?", ["110 km", "110 公里", "110 kilometres",
     "110 kilometers"], LS + "product-catalogue.md", {}),
    ("zh", "table", "Larkspur Glide 2 有多重？", ["14.2 kg", "14.2 千克", "14.2 公斤"],
     LS + "product-catalogue.md", _X),
    ("en", "table", "How much does the Larkspur Metro 3 cost?", ["$1,149", "1,149", "1149"],
     LS + "product-catalogue.md", {}),
    ("zh", "table", "Larkspur Ridge 在中国的售价是多少？", ["16,800", "16800"], LS + "Ridge规格书.docx", {}),
    ("en", "table", "How many Ridge e-bikes did Larkspur ship in Q2 2024?", ["3,905", "3905"],
     LS + "shipments.html", {}),
    ("zh", "table", "Larkspur Metro 3 在 2023 年第四季度出货多少辆？", ["5,020", "5020"], LS + "shipments.html", _X),
    ("en", "table", "How long does it take to charge the Larkspur Ridge battery?", ["5.5 hours", "5.5 小时"],
     LS + "Ridge规格书.docx", _X),
    ("zh", "table", "Larkspur Ridge 的车架质保几年？", ["5 年", "五年", "5 years"], LS + "Ridge规格书.docx", {}),
    ("en", "table", "What is the learning budget for a Senior employee at Larkspur?", ["$2,500", "2,500", "2500"],
     LS + "benefits.html", {}),
    ("zh", "table", "Larkspur 鹿特丹办公室有多少员工？", ["48"], LS + "offices.docx", _X),
    ("en", "table", "When did Larkspur open its Taipei office?", ["2017"], LS + "offices.docx", {}),
    ("en", "table", "How long is the battery warranty on the Larkspur Glide 2?",
     ["1 year", "one year", "12 months", "1 年", "一年"], LS + "warranty-terms.pdf", {"distractors": ["2 years"]}),
    ("zh", "table", "Larkspur Metro 3 的车架保修几年？", ["5 年", "五年", "5 years"], LS + "warranty-terms.pdf", _X),
    ("zh", "table", "Larkspur 总监级员工的 401(k) 配比是多少？", ["6%", "百分之六"], LS + "benefits.html", _X),
]  # fmt: skip

EXTERNAL: list[Row] = [
    ("en", "external", "Who is the CEO of Qinglan Technology?", ["Zhou Mingyuan", "周明远"], "ext-qinglan-ceo-en",
     {"distractors": ["Zhao Qiming", "赵启明", "Luo Wen"]}),
    ("zh", "external", "青岚科技的首席执行官是谁？", ["周明远"],
     "ext-qinglan-ceo-zh", {"distractors": ["赵启明", "罗文"]}),
    ("en", "external", "What is the charging power of the Yunque S5?", ["45 W", "45W", "45 瓦", "45 watts"],
     "ext-yunque-s5-review-en", {}),
    ("zh", "external", "云雀 S5 支持多少瓦的快充？", ["45 瓦", "45瓦", "45 W", "45W"], "ext-yunque-s5-review-zh", {}),
    ("en", "external", "How much did Kestrel Labs raise in its Series C round?",
     ["600 million", "6 亿元", "6亿"], "ext-kestrel-series-c-en", {"distractors": ["2 亿元"]}),
    ("zh", "external", "红隼实验室的 C 轮融资金额是多少？", ["6 亿元", "6亿", "600 million"], "ext-kestrel-series-c-zh",
     {"distractors": ["2 亿元"]}),
    ("en", "external", "When was Larkspur Mobility founded?", ["2011"], "ext-larkspur-profile-en",
     {"distractors": ["2013"]}),
    ("zh", "external", "Larkspur Mobility 成立于哪一年？", ["2011"],
     "ext-larkspur-profile-zh", {"distractors": ["2013"]}),
    ("en", "external", "How many Glide 2 scooters did Larkspur recall?", ["3,200", "3200"], "ext-glide2-recall-en", {}),
    ("zh", "external", "Larkspur 召回了多少辆 Glide 2 滑板车？", ["3200", "3,200"], "ext-glide2-recall-zh", {}),
    ("en", "external", "Which design award did the Qinglan AP9 win?", ["Golden Kite", "金鸢"], "ext-ap9-award-en", {}),
    ("zh", "external", "青岚 AP9 获得了什么设计奖？", ["金鸢工业设计奖", "金鸢", "Golden Kite"],
     "ext-ap9-award-zh", {}),
    ("en", "external", "Where will Larkspur open its European assembly plant?", ["Brno", "布尔诺"],
     "ext-larkspur-brno-en", {"distractors": ["Rotterdam"]}),
    ("zh", "external", "Larkspur 的欧洲组装厂设在哪里？", ["布尔诺", "Brno"], "ext-larkspur-brno-zh",
     {"distractors": ["鹿特丹", "Rotterdam"]}),
    ("en", "external", "How many patents does Kestrel Labs hold?", ["312"], "ext-kestrel-patents-en",
     {"distractors": ["four"]}),
    ("zh", "external", "红隼实验室有多少件授权专利？", ["312"], "ext-kestrel-patents-zh", {}),
]  # fmt: skip

TEXT: list[Row] = [
    ("en", "text", "How many days of annual leave do Kestrel Labs employees get?", ["15 days", "15 天", "fifteen days"],
     KD + "employee-handbook.md", {}),
    ("zh", "text", "红隼实验室员工每年有多少天年假？", ["15 天", "15天", "15 days"], KD + "employee-handbook.md", _X),
    ("en", "text", "What are the core working hours at Kestrel Labs?", ["10:00", "10 am"], KD + "employee-handbook.md",
     {}),
    ("zh", "text", "红隼实验室的产假有多少天？", ["158 天", "158天", "158 days"], KD + "福利补充说明.md",
     {"distractors": ["10 天"]}),
    ("en", "text", "How long is maternity leave at Kestrel Labs?", ["158 days", "158 天"], KD + "福利补充说明.md", _X),
    ("zh", "text", "红隼实验室员工每周最多可以居家办公几天？", ["两天", "2 天", "2天", "two days"],
     KD + "employee-handbook.md", _X),
    ("en", "text", "What meal allowance do Kestrel Labs employees get on business trips?",
     ["120 yuan", "120 元", "120"], KD + "employee-handbook.md", {}),
    ("zh", "text", "红隼实验室的差旅报销要在出差结束后多少天内提交？", ["30 天", "30天", "30 days"],
     KD + "差旅报销政策.md", {}),
    ("en", "text", "When did Wang Lei, the sales director, join Kestrel Labs?", ["2019"],
     KD + "people/wang-lei-sales.md",
     {"distractors": ["2016"]}),
    ("zh", "text", "华南区销售总监王磊是哪一年加入红隼实验室的？", ["2019"], KD + "people/wang-lei-sales.md",
     {"cross_lingual": True, "distractors": ["2016"]}),
    ("en", "namesake", "Who is Wang Lei?", ["engineer", "sales"], KD + "people/wang-lei-engineer.md",
     {"case": "wang_lei"}),
    ("zh", "namesake", "王磊是谁？", ["工程师", "销售"], KD + "组织架构.md", {"case": "wang_lei"}),
    ("en", "text", "When was Kestrel Labs founded?", ["2014"], KD + "about-kestrel-labs.md", {}),
    ("zh", "text", "青岚科技成立于哪一年？", ["2012"], QG + "管理团队.md", {"distractors": ["2017"]}),
    ("en", "text", "How much is the monthly meal allowance at Qinglan Technology?", ["600 yuan", "600 元", "600"],
     QG + "员工手册.md", _X),
    ("zh", "text", "青岚科技的餐补是每月多少钱？", ["600 元", "600元"], QG + "员工手册.md", {}),
    ("zh", "namesake", "陈静是谁？", ["财务", "测试"], QG + "people/陈静-测试工程师.md", {}),
    ("en", "text", "How many days a week can Qinglan employees work remotely?", ["one day", "1 day", "一天"],
     QG + "remote-work-policy.md", {}),
    ("zh", "text", "青岚科技员工每周可以远程办公几天？", ["一天", "1 天", "1天", "one day"],
     QG + "remote-work-policy.md", _X),
    ("en", "text", "Does Qinglan Technology reimburse home internet costs for remote work?", ["not reimbursed"],
     QG + "remote-work-policy.md", {}),
    ("zh", "text", "青岚科技报销远程办公的家庭网费吗？",
     ["不予报销", "不报销", "不会报销", "不能报销", "not reimbursed"], QG + "remote-work-policy.md", _X),
    ("en", "text", "What is the daily travel allowance at Qinglan Technology?", ["150 yuan", "150 元", "150"],
     QG + "费用报销制度.md", _X),
    ("zh", "text", "在青岚科技工作满 1 年不满 10 年的员工有几天年假？", ["5 天", "5天", "五天"], QG + "员工手册.md",
     {"distractors": ["10 天", "15 天"]}),
    ("en", "text", "Who is the CEO of Larkspur Mobility?", ["Priya Natarajan"], LS + "leadership.md", {}),
    ("zh", "text", "Larkspur Mobility 的首席执行官是谁？", ["Priya Natarajan"], LS + "leadership.md", _X),
    ("en", "text", "How long is parental leave at Larkspur Mobility?", ["16 weeks", "16 周"],
     LS + "employee-handbook.md",
     {}),
    ("zh", "text", "Larkspur 员工每年有多少天带薪休假（PTO）？", ["20 天", "20天", "20 days"],
     LS + "employee-handbook.md",
     _X),
    ("en", "text", "What is Larkspur's per diem for international trips?", ["$95", "95"], LS + "expense-policy.md",
     {"distractors": ["$75"]}),
    ("zh", "text", "Larkspur 台北办公室每月交通补贴是多少？", ["1,200", "1200"], LS + "台北办公室员工须知.md", {}),
    ("en", "text", "How many days a week can Larkspur employees work remotely?", ["three days", "3 days", "三天"],
     LS + "employee-handbook.md", {}),
    ("zh", "text", "Larkspur 台北办公室 2023 年度的年终奖金是几个月薪资？", ["1.5 个月", "1.5个月"],
     LS + "台北办公室员工须知.md", {}),
    ("en", "text", "What is Larkspur's hotel cap in San Francisco?", ["$320", "320"], LS + "expense-policy.md",
     {"distractors": ["$220"]}),
    ("zh", "text", "Larkspur 员工出差使用私家车，每英里报销多少钱？", ["0.67"], LS + "expense-policy.md", _X),
    ("en", "text", "Does the Larkspur warranty cover tyres?", ["not covered", "wear parts"],
     LS + "warranty-terms.pdf", {}),
    ("zh", "text", "Larkspur 的保修包括轮胎吗？", ["不包括", "不在保修范围", "不保修", "不予保修", "not covered"],
     LS + "warranty-terms.pdf", _X),
    ("en", "text", "Does Kestrel Labs reimburse taxi rides when work ends late?", ["22:00", "10 pm"],
     KD + "employee-handbook.md", {}),
    ("zh", "text", "红隼实验室每月的健身补贴是多少？", ["200 元", "200元", "200 yuan"],
     KD + "employee-handbook.md", _X),
]  # fmt: skip


def questions(ext_company: dict[str, str]) -> list[dict[str, Any]]:
    """Every question as an eval line, ids ``nm-<lang>-NNN`` in a fixed order.

    ``ext_company`` maps an external passage id to its company.
    """
    out: list[dict[str, Any]] = []
    count = {"zh": 0, "en": 0}
    for lang, kind, question, answers, source, extra in UNANSWERABLE + TABLE + EXTERNAL + TEXT:
        count[lang] += 1
        if source.startswith("ext-"):
            company = ext_company[source]
        else:  # kestrel/... or internal/<company>/...
            company = "kestrel" if source.startswith(KD) else source.split("/")[1]
        where = {"unanswerable": "none", "external": "external"}.get(kind, "internal")
        row: dict[str, Any] = {
            "id": f"nm-{lang}-{count[lang]:03d}",
            "question": question,
            "answers": answers,
            "lang": lang,
            "answerable": kind != "unanswerable",
            "kind": kind,
            "gold_location": where,
            "company": company,
            "source": source,
        }
        if kind == "namesake":
            row["answers_all"] = True  # every bearer: the answer must contain each string
        out.append(row | extra)
    return out
