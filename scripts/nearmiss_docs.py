"""The internal documents of the near-miss set: three invented companies, written by hand.

* **Kestrel Labs / 红隼实验室** (``kestrel/``): phones (Yunque / 云雀) and earbuds; the four cases
  of the report this set answers: no document names a CEO (two founders and a 首席硬件工程师 do
  appear), nothing mentions a company car, the Yunque S5 battery capacity is only in a Chinese
  spec table while its Q3 2023 shipments (8,640) sit in an English one, and two people called
  Wang Lei (an engineer, a sales director).
* **Qinglan Technology / 青岚科技** (``internal/qinglan/``): air purifiers and a robot vacuum,
  mostly Chinese documents; its team page names a chairman, a CFO and a CTO but no CEO (the
  external corpus does); two people called 陈静.
* **Larkspur Mobility** (``internal/larkspur/``): scooters and e-bikes, mostly English; its
  leadership page names a CEO but no CTO.

Every fact is invented. Tables are real tables in each format (Markdown pipes, HTML, DOCX, and one
hand-drawn PDF).
"""

from __future__ import annotations

from nearmiss_render import Doc, H, P, table

K, Q, L = "kestrel", "qinglan", "larkspur"


def kestrel() -> list[Doc]:
    return [
        Doc("kestrel/about-kestrel-labs.md", "About Kestrel Labs", "en", K, [
            P("Kestrel Labs is a consumer electronics company headquartered in Hangzhou, China. It was founded "
              "in 2014 by Lin Qiao and Marcus Hale, two former telecom engineers, and today employs about 420 "
              "people in three offices."),
            H("What we make"),
            P("Kestrel Labs designs the Yunque (云雀) line of smartphones, the Yunque S5, the Yunque S3 and the "
              "Yunque Lite, and the Kestrel Buds wireless earbuds. Phones are assembled by contract "
              "manufacturers in Dongguan; design, testing and software are done in-house."),
            H("How we are organised"),
            P("The company has four divisions: Hardware, Software, Sales and Operations. Each division head "
              "reports to the executive committee, which meets every Monday morning in Hangzhou."),
        ]),
        Doc("kestrel/employee-handbook.md", "Kestrel Labs Employee Handbook", "en", K, [
            P("This handbook applies to all employees of Kestrel Labs. The Chinese supplement (福利补充说明) and "
              "the travel policy (差旅报销政策) complete it."),
            H("Working hours"),
            P("The standard working week is 40 hours. Core hours are 10:00 to 16:00, Monday to Friday; outside "
              "core hours employees choose when they start and finish. Overtime must be approved in advance by "
              "the division head and is compensated with time off in lieu."),
            H("Remote work"),
            P("After the three-month probation period, employees may work from home up to two days a week. "
              "Hardware lab staff agree their remote days with their team lead."),
            H("Annual leave"),
            P("Full-time employees receive 15 days of paid annual leave per calendar year, plus one extra day "
              "for every two full years of service, up to 20 days. Up to five unused days can be carried over "
              "and must be taken by 31 March of the next year."),
            H("Sick leave"),
            P("Employees have ten days of paid sick leave per year. A doctor's note is needed for an absence of "
              "more than two consecutive days."),
            H("Benefits"),
            P("Kestrel Labs pays supplementary health insurance for employees and their children, an annual "
              "health check and a gym subsidy of 200 yuan a month. Employees can buy Kestrel products at 30% "
              "off, up to two phones a year."),
            H("Expenses"),
            P("On business trips employees receive a meal allowance of 120 yuan per day. Taxi rides are "
              "reimbursed when work ends after 22:00, and to and from airports and railway stations. Hotel "
              "limits are set in the travel policy."),
        ]),
        Doc("kestrel/福利补充说明.md", "红隼实验室员工福利补充说明", "zh", K, [
            P("本说明是《Kestrel Labs Employee Handbook》的补充，适用于红隼实验室（Kestrel Labs）在中国大陆签订"
              "劳动合同的全体员工。"),
            H("婚假与产假"),
            P("员工依法登记结婚的，可享受婚假 10 天（含法定 3 天）。女员工生育的，享受产假 158 天；难产或生育"
              "多胞胎的，按当地规定增加产假天数。"),
            H("节日福利"),
            P("春节、端午节和中秋节，公司为每位员工发放节日礼金 500 元。员工生日当月可领取生日蛋糕券一张。"),
            H("补充公积金"),
            P("公司按员工月工资的 5% 缴纳补充住房公积金，员工个人缴纳同等比例。"),
        ]),
        Doc("kestrel/云雀S5产品规格.md", "云雀 S5（Yunque S5）产品规格", "zh", K, [
            P("云雀 S5 是红隼实验室（Kestrel Labs）于 2023 年推出的旗舰手机，主打长续航和轻薄机身。"),
            table("参数 | 云雀 S5", [
                "屏幕 | 6.7 英寸 OLED，2400 × 1080",
                "处理器 | 天枢 T820 八核",
                "电池容量 | 5200 毫安时",
                "重量 | 198 克",
                "机身厚度 | 7.9 毫米",
                "存储 | 8 GB + 256 GB；12 GB + 512 GB",
                "颜色 | 曜石黑、雾松绿、月光白",
                "发布日期 | 2023 年 4 月 18 日",
                "起售价 | 2999 元",
            ]),
        ]),
        Doc("kestrel/shipments-by-quarter.md", "Kestrel Labs quarterly shipments", "en", K, [
            P("Units shipped to distributors and online stores, by product and quarter. Figures for closed "
              "quarters are final. The Yunque S5 went on sale in April 2023."),
            table("Product | Q1 2023 | Q2 2023 | Q3 2023 | Q4 2023 | Q1 2024 | Q2 2024", [
                "Yunque S5 | — | 6,120 | 8,640 | 9,975 | 7,430 | 7,015",
                "Yunque S3 | 4,880 | 5,240 | 4,615 | 5,902 | 5,310 | 4,470",
                "Yunque Lite | 10,250 | 9,760 | 11,385 | 12,040 | 8,920 | 9,310",
                "Kestrel Buds | 15,600 | 14,275 | 16,830 | 21,470 | 13,905 | 14,660",
            ]),
        ]),
        Doc("kestrel/people/wang-lei-engineer.md", "Wang Lei (engineer)", "en", K, [
            P("Wang Lei (born 1984) is a principal hardware engineer at Kestrel Labs. He leads the battery and "
              "power team at the Hangzhou headquarters and joined the company in 2016, after eight years at a "
              "laptop maker in Suzhou."),
            H("Work"),
            P("He designed the charging circuit of the Yunque S5 and holds four patents on fast charging. He "
              "also mentors the hardware graduate programme."),
        ]),
        Doc("kestrel/people/wang-lei-sales.md", "Wang Lei (sales)", "en", K, [
            P("Wang Lei is the sales director for southern China at Kestrel Labs. She works from the Shenzhen "
              "office and is responsible for distributor and carrier sales in Guangdong, Guangxi, Fujian and "
              "Hainan."),
            H("Background"),
            P("She joined Kestrel Labs in 2019 from a consumer electronics retailer. Under her lead, southern "
              "China became the company's largest sales region in 2023."),
        ]),
        Doc("kestrel/offices.html", "Kestrel Labs offices", "en", K, [
            P("Kestrel Labs works from three offices. Visitors register at the front desk with a photo ID."),
            table("Office | Address | Staff | Main teams", [
                "Hangzhou (headquarters) | 8F, Building 3, 1180 Wenyi West Road, Yuhang District, Hangzhou | 260 "
                "| Hardware, Software, Operations",
                "Shenzhen | Room 1205, Tower B, 3099 Keyuan South Road, Nanshan District, Shenzhen | 95 "
                "| Sales (southern China), Supply chain",
                "Chengdu | 16F, 88 Tianfu Third Street, High-tech Zone, Chengdu | 65 | Customer service, Testing",
            ]),
        ]),
        Doc("kestrel/价格表.docx", "红隼实验室 2024 年产品建议零售价", "zh", K, [
            P("以下为 2024 年 7 月 1 日起执行的建议零售价（人民币，含税）。经销商促销价不得低于建议零售价的 90%。"),
            table("产品 | 版本 | 建议零售价（元）", [
                "云雀 S5 | 8GB + 256GB | 2999",
                "云雀 S5 | 12GB + 512GB | 3499",
                "云雀 S3 | 8GB + 128GB | 1899",
                "云雀 Lite | 6GB + 128GB | 1299",
                "Kestrel Buds | 标准版 | 399",
                "Kestrel Buds | 降噪版 | 599",
            ]),
        ]),
        Doc("kestrel/差旅报销政策.md", "红隼实验室差旅报销政策", "zh", K, [
            H("适用范围"),
            P("本政策适用于红隼实验室（Kestrel Labs）全体员工的国内出差。"),
            H("交通"),
            P("出差优先乘坐高铁二等座；单程超过 6 小时的，可乘坐飞机经济舱。"),
            H("住宿标准"),
            table("城市类别 | 每晚住宿上限（元）", [
                "一线城市（北京、上海、广州、深圳） | 600",
                "省会城市 | 450",
                "其他城市 | 350",
            ]),
            H("报销时限"),
            P("出差结束后 30 天内在费控系统提交报销；逾期提交的，须经部门负责人特批。"),
        ]),
        Doc("kestrel/组织架构.md", "红隼实验室组织架构（2024 年）", "zh", K, [
            P("红隼实验室设硬件、软件、销售、运营四个事业部，各事业部负责人向公司执行委员会汇报。"),
            table("部门 | 负责人 | 所在地", [
                "硬件事业部 | 孙启航 | 杭州",
                "硬件事业部·电池与电源组 | 王磊（Wang Lei），首席硬件工程师 | 杭州",
                "软件事业部 | 郑雅文 | 杭州",
                "销售事业部·华南区 | 王磊（Wang Lei），华南区销售总监 | 深圳",
                "销售事业部·华东区 | 许嘉 | 杭州",
                "运营事业部 | 何卫东 | 杭州",
                "客户服务中心 | 邓晓 | 成都",
            ]),
        ]),
    ]  # fmt: skip


def qinglan() -> list[Doc]:
    return [
        Doc("internal/qinglan/员工手册.md", "青岚科技员工手册（2024 版）", "zh", Q, [
            P("青岚科技（Qinglan Technology）总部位于苏州，主要产品为空气净化器和扫地机器人。本手册适用于全体"
              "正式员工。"),
            H("工作时间"),
            P("公司实行弹性工作制，每日工作 8 小时，最早 8:00、最晚 10:00 上班，午休 1 小时（12:00—13:00）。"),
            H("年假"),
            P("员工累计工作满 1 年不满 10 年的，年假 5 天；满 10 年不满 20 年的，年假 10 天；满 20 年的，年假 "
              "15 天。公司另给予每位员工每年 2 天带薪福利假。"),
            H("补贴与福利"),
            P("餐补每月 600 元，随工资发放。在深圳研发中心工作的员工另享住房补贴每月 1500 元。公司按员工月工资"
              "的 12% 缴纳住房公积金，并为员工购买补充医疗保险。"),
            H("试用期"),
            P("劳动合同期限为三年的，试用期为 3 个月，试用期工资为转正工资的 90%。"),
            H("加班"),
            P("工作日加班须提前在 OA 系统申请，按 1:1 调休；法定节假日加班按国家规定支付三倍工资。"),
        ]),
        Doc("internal/qinglan/产品目录.html", "青岚科技 2024 产品目录", "zh", Q, [
            P("青岚空气净化器适用于家庭和小型办公室，全系支持青岚家居 App 远程控制。"),
            table("型号 | 青岚 AP7 | 青岚 AP9", [
                "洁净空气量（CADR） | 450 立方米/小时 | 600 立方米/小时",
                "适用面积 | 31—54 平方米 | 42—72 平方米",
                "噪音（睡眠档） | 26 分贝 | 28 分贝",
                "重量 | 7.2 千克 | 9.8 千克",
                "颜色 | 云白、石墨灰 | 云白",
                "上市时间 | 2022 年 9 月 | 2023 年 10 月",
                "建议零售价 | 1999 元 | 3499 元",
            ], caption="青岚空气净化器参数对比"),
            H("青岚 R3 扫地机器人"),
            P("R3 采用激光导航，吸力 4000 帕，单次续航约 150 分钟，尘盒容量 400 毫升，建议零售价 2299 元。"),
        ]),
        Doc("internal/qinglan/AP9-spec-sheet.md", "Qinglan AP9 Air Purifier: Specification Sheet", "en", Q, [
            P("The AP9 is Qinglan Technology's air purifier for large rooms, launched in October 2023."),
            table("Specification | AP9", [
                "CADR (particles) | 600 m³/h",
                "Recommended room size | 42–72 m²",
                "Filter | three-layer HEPA H13 with activated carbon",
                "Filter life | about 12 months (8 hours a day)",
                "Noise (sleep mode) | 28 dB",
                "Rated power | 65 W",
                "Weight | 9.8 kg",
                "Connectivity | Wi-Fi, Qinglan Home app",
                "Retail price | 3,499 CNY",
            ]),
            H("Care"),
            P("Replace the filter when the app shows the filter indicator in red. The pre-filter can be "
              "vacuumed once a month."),
        ]),
        Doc("internal/qinglan/季度出货量.docx", "青岚科技季度出货量（台）", "zh", Q, [
            P("统计口径：发往经销商及电商仓库的数量。AP9 于 2023 年 10 月上市。"),
            table("产品 | 2023年第一季度 | 2023年第二季度 | 2023年第三季度 | 2023年第四季度 | 2024年第一季度 | "
                  "2024年第二季度", [
                "AP7 | 9,860 | 8,420 | 10,315 | 14,780 | 9,105 | 8,690",
                "AP9 | — | — | — | 7,180 | 6,240 | 5,935",
                "R3 | 11,200 | 10,640 | 12,980 | 16,375 | 11,730 | 12,450",
            ]),
        ]),
        Doc("internal/qinglan/管理团队.md", "青岚科技管理团队（2023 年 12 月更新）", "zh", Q, [
            H("董事长 赵启明"),
            P("赵启明是青岚科技创始人、董事长。他于 2012 年在苏州创办青岚科技，此前在家电企业从事空气处理产品"
              "研发十年。"),
            H("首席财务官 陈静"),
            P("陈静于 2017 年加入青岚科技，现任首席财务官，负责财务、投资者关系和内部审计。她是中国注册会计师。"),
            H("首席技术官 刘子航"),
            P("刘子航负责公司研发体系，主导了 AP 系列净化器的风道设计和 R3 的激光导航算法。他常驻深圳研发中心。"),
        ]),
        Doc("internal/qinglan/people/陈静-测试工程师.md", "陈静（测试工程师）", "zh", Q, [
            P("陈静（1995 年出生）是青岚科技苏州总部的高级测试工程师，负责空气净化器的噪音和能效测试。她 2019 年"
              "从南京理工大学毕业后加入公司，参与了 AP9 的型式试验。"),
            H("工作"),
            P("她编写了公司的噪音测试规程，并负责与第三方检测机构对接。"),
        ]),
        Doc("internal/qinglan/办公地点.md", "青岚科技办公地点", "zh", Q, [
            table("办公地点 | 地址 | 员工人数 | 启用年份", [
                "苏州总部 | 苏州工业园区星湖街 328 号 | 540 | 2012",
                "深圳研发中心 | 深圳市南山区高新南七道 18 号 | 180 | 2018",
                "成都客服中心 | 成都市武侯区天府大道北段 966 号 | 75 | 2022",
            ]),
            P("访客请提前一天通过行政部预约。"),
        ]),
        Doc("internal/qinglan/费用报销制度.md", "青岚科技费用报销制度", "zh", Q, [
            H("出差补贴"),
            P("员工出差期间每天发放出差补贴 150 元，包含餐费和市内交通。"),
            H("业务招待"),
            P("业务招待费人均不超过 300 元，须事先经部门总监审批。"),
            H("发票"),
            P("报销须提供增值税普通发票或专用发票，抬头为“青岚科技（苏州）有限公司”。"),
            H("审批"),
            P("单笔 5000 元以下由部门总监审批；5000 元及以上另须首席财务官审批。"),
        ]),
        Doc("internal/qinglan/remote-work-policy.md", "Qinglan Technology Remote Work Policy", "en", Q, [
            P("This policy applies to employees of Qinglan Technology in Suzhou, Shenzhen and Chengdu."),
            H("Eligibility"),
            P("Employees who have passed probation may work remotely one day per week, on a day agreed with "
              "their manager. Customer service staff in Chengdu are not eligible because of shift rostering."),
            H("Equipment"),
            P("The company lends a laptop and a monitor. Home internet costs are not reimbursed."),
            H("Security"),
            P("Remote work must go through the company VPN, and customer data may not be stored on personal "
              "devices."),
        ]),
    ]  # fmt: skip


def larkspur() -> list[Doc]:
    return [
        Doc("internal/larkspur/employee-handbook.md", "Larkspur Mobility Employee Handbook", "en", L, [
            P("Larkspur Mobility designs electric scooters and e-bikes. We are headquartered in Portland, Oregon, "
              "with offices in Rotterdam and Taipei."),
            H("Hours and flexibility"),
            P("Core collaboration hours are 10:00 to 15:00 Pacific time, and full-time means 40 hours a week. "
              "Employees may work remotely up to three days a week; workshop and warehouse staff work on site."),
            H("Paid time off"),
            P("Employees accrue 20 days of PTO per year, monthly, plus 11 company holidays. Up to five unused "
              "days roll over to the next year."),
            H("Parental leave"),
            P("All parents get 16 weeks of fully paid parental leave, to be taken within the first year after a "
              "birth or adoption."),
            H("Commuting"),
            P("Every employee can get a free Larkspur Glide 2 scooter or 50% off a Ridge e-bike, and a monthly "
              "transit pass worth up to $100."),
            H("Learning"),
            P("Every employee has a yearly learning budget for courses, books and conferences; the amount "
              "depends on the level (see the benefits table)."),
        ]),
        Doc("internal/larkspur/benefits.html", "Larkspur benefits by level", "en", L, [
            P("Benefits for US employees. Rotterdam and Taipei follow local plans with the same learning "
              "budgets."),
            table("Benefit | Associate | Senior | Director", [
                "Learning budget per year | $1,500 | $2,500 | $4,000",
                "Home office stipend (one-off) | $600 | $600 | $900",
                "401(k) match | 4% | 5% | 6%",
                "Health plan | Gold PPO | Gold PPO | Platinum PPO",
            ]),
        ]),
        Doc("internal/larkspur/product-catalogue.md", "Larkspur product catalogue 2024", "en", L, [
            P("Three models, all designed in Portland and assembled by partners in Taiwan."),
            table("Model | Type | Range | Battery | Weight | Top speed | Price | Colours | Released", [
                "Glide 2 | kick scooter | 45 km | 460 Wh | 14.2 kg | 25 km/h | $699 | Slate, Sand | March 2022",
                "Metro 3 | folding e-bike | 70 km | 540 Wh | 19.8 kg | 25 km/h | $1,149 | Black, Sage | May 2023",
                "Ridge | trekking e-bike | 110 km | 720 Wh | 24.5 kg | 25 km/h | $2,390 | Forest, Graphite "
                "| September 2023",
            ]),
            H("Ordering"),
            P("Dealers order through the Larkspur partner portal; consumers buy online or from dealers."),
        ]),
        Doc("internal/larkspur/Ridge规格书.docx", "Larkspur Ridge 电动自行车规格书（中国市场）", "zh", L, [
            P("Ridge 是 Larkspur Mobility 面向长途通勤和旅行设计的电动自行车，2023 年 9 月发布，2024 年 3 月在"
              "中国上市。"),
            table("项目 | 参数", [
                "电机 | 中置电机，额定功率 250 瓦",
                "电池 | 720 瓦时，可拆卸",
                "充电时间 | 约 5.5 小时（0—100%）",
                "续航 | 最长 110 公里（经济模式）",
                "整车重量 | 24.5 千克",
                "质保 | 车架 5 年，电池与电机 2 年",
                "中国售价 | 16,800 元",
            ]),
        ]),
        Doc("internal/larkspur/shipments.html", "Larkspur Mobility: units shipped per quarter", "en", L, [
            P("Units shipped from the Rotterdam and Portland warehouses to dealers and customers."),
            table("Model | Q1 2023 | Q2 2023 | Q3 2023 | Q4 2023 | Q1 2024 | Q2 2024", [
                "Glide 2 | 11,020 | 13,480 | 12,760 | 9,935 | 10,410 | 12,205",
                "Metro 3 | — | 2,140 | 4,385 | 5,020 | 4,610 | 5,275",
                "Ridge | — | — | 1,260 | 3,340 | 2,875 | 3,905",
            ]),
        ]),
        Doc("internal/larkspur/leadership.md", "Larkspur Mobility leadership team", "en", L, [
            H("Priya Natarajan, Chief Executive Officer"),
            P("Priya Natarajan has led Larkspur Mobility as chief executive since 2019. Before Larkspur she ran "
              "operations at a bike-sharing company in Seattle."),
            H("Tomás Lindqvist, Chief Operating Officer"),
            P("Tomás Lindqvist runs the manufacturing partners, the Rotterdam warehouse and customer service. He "
              "joined in 2020."),
            H("Helen Cho, Chief Financial Officer"),
            P("Helen Cho joined Larkspur in 2021 from an investment bank, where she covered transport companies."),
        ]),
        Doc("internal/larkspur/offices.docx", "Larkspur Mobility offices", "en", L, [
            P("The Portland headquarters moved to its current building in 2013."),
            table("Office | Address | Opened | Staff", [
                "Portland (headquarters) | 1420 SE Water Avenue, Portland, OR 97214 | 2013 | 210",
                "Rotterdam | Wilhelminakade 91, 3072 AP Rotterdam | 2020 | 48",
                "Taipei | 7F, No. 216, Section 4, Zhongxiao East Road, Da'an District, Taipei | 2017 | 36",
            ]),
        ]),
        Doc("internal/larkspur/expense-policy.md", "Larkspur Mobility Expense Policy", "en", L, [
            H("Travel"),
            P("The per diem is $75 a day for domestic trips and $95 a day for international trips. Hotels are "
              "capped at $220 a night in the US, or $320 a night in New York and San Francisco."),
            H("Mileage"),
            P("Use of a personal car for business is reimbursed at $0.67 per mile."),
            H("Approval"),
            P("Expenses above $2,000 need the approval of a vice president."),
        ]),
        Doc("internal/larkspur/warranty-terms.pdf", "Larkspur Mobility Limited Warranty", "en", L, [
            P("This warranty covers Larkspur scooters and e-bikes bought new from Larkspur or an authorised "
              "dealer. It starts on the date of delivery."),
            table("Component | Glide 2 | Metro 3 | Ridge", [
                "Frame | 3 years | 5 years | 5 years",
                "Battery | 1 year | 2 years | 2 years",
                "Motor | 1 year | 2 years | 2 years",
                "Display and electronics | 1 year | 1 year | 2 years",
            ]),
            H("What is not covered"),
            P("Tyres, brake pads and chains are wear parts and are not covered. Damage from accidents, racing or "
              "rental use is excluded."),
            H("Making a claim"),
            P("Claims go through the dealer who sold the vehicle, or to support@larkspur.example with the order "
              "number and a photo of the serial plate."),
        ]),
        Doc("internal/larkspur/台北办公室员工须知.md", "Larkspur 台北办公室员工须知", "zh", L, [
            P("台北办公室负责 Larkspur Mobility 的亚洲供应链和质量管理。"),
            H("工作时间"),
            P("周一至周五 9:00—18:00，午休 12:00—13:00。"),
            H("交通补贴"),
            P("每月发放交通补贴 1,200 新台币。"),
            H("年终奖金"),
            P("年终奖金依公司年度业绩发放，2023 年度为 1.5 个月薪资。"),
        ]),
    ]  # fmt: skip


def all_docs() -> list[Doc]:
    return kestrel() + qinglan() + larkspur()
