"""Output in a pipe is whole: no wrapping at 80 columns, no "…", no library log lines.

``crag trace list | cat`` and ``crag trace show ID | cat`` printed rich tables 80 columns wide
with "…" in every long cell; ``crag chat``'s ``/sources`` folded a citation mid-word and cut its
text; jieba announced its dictionary on stderr in the middle of a conversation. The real CLI runs
here as a separate process with its stdout and stderr as pipes (and no ``COLUMNS``), against a
real knowledge base; the LLM is a local OpenAI-compatible stub, which plays no part in layout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from crag.testing.processes import crag_cli
from crag.testing.stubs import StubLLM
from crag.trace.plain import LIST_COLUMNS

pytestmark = [pytest.mark.integration]

TITLE = "Wang Lei (chess player, born 1983), Chinese grandmaster and national champion of 2004 and 2011"
TEXT = (
    "Wang Lei is a Chinese chess grandmaster born in 1983 in the Haidian district of Beijing. "
    "Wang Lei won the national chess title in 2004, beating the defending champion in the last round, "
    "and won it again in 2011 after a long break from tournament play spent coaching juniors in Shanghai. "
    "He has represented China at four Chess Olympiads and is known for his sharp handling of the Sicilian."
)
QUESTION = (
    "When did Wang Lei, the Chinese chess grandmaster who was born in 1983 in Beijing, "
    "win the national chess title for the very first time?"
)
JIEBA_LINES = ("Building prefix dict", "Loading model", "Prefix dict has been built", "Dumping model")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str], list[str]]]:
    root = tmp_path_factory.mktemp("pipes")
    src = root / "players-of-the-chinese-national-chess-championship.jsonl"
    rows = [{"title": TITLE, "text": TEXT}, {"title": "Harbour", "text": "The harbour museum opened in 1901."}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    with StubLLM() as llm:
        llm.answer = "Wang Lei won the national chess title in 2004 [1]."
        env = {"CRAG_LLM__BACKEND": "openai", "CRAG_LLM__BASE_URL": llm.url, "CRAG_SEARCH__PROVIDER": "none"}
        assert crag_cli("ingest", str(src), "--kb", str(root / "kb"), env=env).returncode == 0
        ids = []
        for _ in range(2):
            asked = crag_cli("ask", QUESTION, "--kb", str(root / "kb"), "--json", env=env)
            assert asked.returncode == 0, asked.stderr
            ids.append(json.loads(asked.stdout)["trace_id"])
        yield root / "kb", env, ids


@pytest.fixture(autouse=True)
def no_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipe has no width: nothing may tell rich one (the CLI inherits this environment)."""
    for var in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(var, raising=False)


def test_trace_list_in_a_pipe_is_tsv_with_whole_questions(world: tuple[Path, dict[str, str], list[str]]) -> None:
    kb, env, ids = world
    listed = crag_cli("trace", "list", "--kb", str(kb), env=env)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split("\t") == list(LIST_COLUMNS)
    rows = [line.split("\t") for line in lines[1:]]
    assert [r[0] for r in rows] == ids[::-1]  # newest first
    assert all(len(r) == len(LIST_COLUMNS) and r[-1] == QUESTION for r in rows), listed.stdout
    assert "…" not in listed.stdout
    as_json = crag_cli("trace", "list", "--kb", str(kb), "--json", env=env)
    assert [json.loads(line)["question"] for line in as_json.stdout.splitlines()] == [QUESTION, QUESTION]


def test_trace_show_in_a_pipe_holds_every_value_whole(world: tuple[Path, dict[str, str], list[str]]) -> None:
    kb, env, ids = world
    shown = crag_cli("trace", "show", ids[0], "--kb", str(kb), env=env)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "…" not in text
    lines = text.splitlines()
    assert lines[0].startswith(f"trace\t{ids[0]}\t") and f"question\t{QUESTION}" in lines
    retrieved = [line.split("\t") for line in lines if line.startswith("1\t")]
    assert any(r[1] == TITLE and r[6] == TEXT for r in retrieved), text  # the chunk whole, on one line
    assert "Wang Lei won the national chess title in 2004 [1]." in lines
    assert json.loads(crag_cli("trace", "show", ids[0], "--kb", str(kb), "--json", env=env).stdout)["id"] == ids[0]


def test_chat_sources_are_whole_and_no_library_logs(world: tuple[Path, dict[str, str], list[str]]) -> None:
    kb, env, _ = world
    with StubLLM() as llm:
        llm.answer = "Wang Lei won the national chess title in 2004 [1]."
        chat_env = {**env, "CRAG_LLM__BASE_URL": llm.url}
        script = f"{QUESTION}\n/sources\n他是哪一年出生的？\n/exit\n"
        done = subprocess.run(
            [sys.executable, "-m", "crag.cli", "chat", "--kb", str(kb), "--search", "none"],
            input=script, capture_output=True, text=True, timeout=600, env={**os.environ, **chat_env},
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    source = str(kb.parent / "players-of-the-chinese-national-chess-championship.jsonl")
    head = next(line for line in lines if line.startswith("[1] "))
    assert head.split("\t")[0] == f"[1] {TITLE}" and source in head.split("\t")[1], done.stdout
    first = lines[0].split("trace ")[1]  # the first answer's decision line names its trace
    trace = json.loads(crag_cli("trace", "show", first, "--kb", str(kb), "--json", env=env).stdout)
    cited = " ".join(trace["citations"][0]["text"].split())
    assert len(cited) > 240 and f"\t{cited}" in lines, done.stdout  # the cited text whole, on one line
    assert "…" not in done.stdout
    assert not [line for line in done.stderr.splitlines() if line.startswith(JIEBA_LINES)], done.stderr


def test_a_chinese_conversation_leaves_no_library_log_in_the_server_log(tmp_path: Path) -> None:
    """The first request of a server, a Chinese follow-up: condensing it reads the conversation
    with jieba before anything else did, which announced its dictionary in the log."""
    import httpx

    from crag.testing.processes import crag_serve

    src = tmp_path / "wang.jsonl"
    row = {"title": "王磊", "text": "王磊于2004年赢得全国象棋冠军。王磊生于1983年。"}
    src.write_text(json.dumps(row) + "\n", "utf-8")
    with StubLLM() as llm:
        llm.answer = "王磊生于1983年[1]。"
        env = {"CRAG_LLM__BACKEND": "openai", "CRAG_LLM__BASE_URL": llm.url, "CRAG_SEARCH__PROVIDER": "none"}
        assert crag_cli("ingest", str(src), "--kb", str(tmp_path / "kb"), env=env).returncode == 0
        log = tmp_path / "serve.log"
        with crag_serve(tmp_path / "kb", env=env, log=log) as url:
            messages = [
                {"role": "user", "content": "王磊是谁？"},
                {"role": "assistant", "content": "王磊是中国象棋大师，2004年全国冠军。"},
                {"role": "user", "content": "他是哪一年出生的？"},
            ]
            r = httpx.post(f"{url}/v1/chat/completions", json={"messages": messages}, timeout=120)
            assert r.status_code == 200, r.text
    lines = log.read_text("utf-8").splitlines()
    assert any("POST /v1/chat/completions" in line for line in lines)
    assert not [line for line in lines if line.startswith(JIEBA_LINES)], lines
