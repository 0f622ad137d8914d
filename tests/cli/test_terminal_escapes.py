"""Control characters are shown escaped in every terminal output (issue 33).

A document title, a file name or the model's answer can hold ESC sequences (recolour, clear
the screen, set the window title), an 8-bit CSI or a bidi override. The real CLI runs
``ingest``, ``ask`` (streamed and ``--json``), ``trace list`` and ``trace show`` over such a
knowledge base with an OpenAI-compatible stub LLM whose answer carries them too; none reaches
stdout or stderr raw, with colours on or off.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from crag.cli._common import SafeConsole
from crag.testing.stubs import StubLLM
from crag.text import terminal_safe

HOSTILE = ("\x1b]", "\x1b[2J", "\x9b", "\u202e")  # rich's own colours are \x1b[...m: allowed
ANSWER = "The bridge \x1b]0;pwned\x07 was designed by Mira Quell \x1b[2J\x9b31m in 1931 \u202eevil [1]."


def _raw(text: str) -> list[str]:
    return [h for h in HOSTILE if h in text]


@pytest.mark.unit
def test_safe_console_escapes_strings_text_tables_and_panels() -> None:
    """Pins the one place rich turns segments into output (a rich upgrade that moves it fails here)."""
    for color in (False, True):
        buf = io.StringIO()
        console = SafeConsole(file=buf, width=100, force_terminal=color, color_system="standard" if color else None)
        table = Table("file", "reason")
        table.add_row("evil\x1b[31m.md", "title \u202egnp.exe")
        console.print("[bold]title:[/] " + ANSWER)
        console.print(Text(ANSWER, style="green"))
        console.print(table)
        console.print(Panel(Text(ANSWER)))
        out = buf.getvalue()
        assert _raw(out) == [], (color, out)
        assert "\\x1b]0;pwned" in out and "\\u202e" in out and "\\u009b31m" in out
        assert ("\x1b[" in out) is color  # the console's own colours still work


@pytest.mark.unit
def test_terminal_safe_keeps_json_valid_and_lines_intact() -> None:
    encoded = json.dumps({"a": ANSWER, "b": "line\nnext\x7f"}, ensure_ascii=False)
    assert json.loads(terminal_safe(encoded)) == {
        "a": ANSWER.replace("\x9b", "\\u009b").replace("\u202e", "\\u202e") and json.loads(encoded)["a"],
        "b": "line\nnext\x7f",
    }
    assert terminal_safe("a\nb\tc") == "a\nb\tc" and terminal_safe("a\nb", one_line=True) == "a\\nb"


class EscapingLLM(StubLLM):
    answer = ANSWER


@pytest.mark.integration
def test_cli_outputs_never_carry_raw_control_characters(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    name = "evil\x1b[31m\u202e.md"
    (docs / name).write_text(
        # A section heading heads its chunks (the title is the file's name, escapes and all).
        "## Zorblax \x1b]0;pwned\x07 Bridge \x9b31m\u202e\n\nThe Zorblax Bridge was designed by Mira Quell in 1931. "
        "佐布拉克斯大桥由米拉·奎尔设计。",
        "utf-8",
    )
    (docs / "x\x1b[2J.png").write_bytes(b"not ingested: the skipped table names it")
    kb = tmp_path / "kb"
    with EscapingLLM() as llm:
        for color in ("", "1"):
            env = {
                **os.environ,
                "COLUMNS": "200",
                "CRAG_LLM__BACKEND": "openai",
                "CRAG_LLM__BASE_URL": llm.url,
                "CRAG_SEARCH__PROVIDER": "none",
                "CRAG_EVALUATOR__BACKEND": "heuristic",
                "CRAG_CORRECTION__VERIFY_CORRECT": "false",
            }
            if color:
                env["FORCE_COLOR"] = "1"
            else:
                env.pop("FORCE_COLOR", None)

            def crag(*args: str, env: dict[str, str] = env) -> str:
                done = subprocess.run(
                    [sys.executable, "-m", "crag.cli", *args], env=env, capture_output=True, text=True, timeout=300
                )
                assert done.returncode == 0, done.stderr
                return done.stdout + done.stderr

            outputs = {
                "ingest": crag("ingest", str(docs), "--kb", str(kb)),
                "ask": crag("ask", "Who designed the Zorblax Bridge?", "--kb", str(kb)),
                "ask --json": crag("ask", "Who designed the Zorblax Bridge?", "--kb", str(kb), "--json"),
                "trace list": crag("trace", "list", "--kb", str(kb)),
            }
            trace_id = json.loads(outputs["ask --json"].splitlines()[0])["trace_id"]
            outputs["trace show"] = crag("trace", "show", trace_id, "--kb", str(kb))
            outputs["trace show --json"] = crag("trace", "show", trace_id, "--kb", str(kb), "--json")
            for what, text in outputs.items():
                assert _raw(text) == [], (color, what, text)
                if not color:
                    assert "\x1b" not in text, (what, text)
            assert "\\x1b[2J" in outputs["ingest"] and "\\u202e" in outputs["trace show"]
            assert json.loads(outputs["trace show --json"])["answer"]
            if not color:  # plain output keeps the streamed text (a live view may redraw it as a refusal)
                assert "\\x1b]0;" in outputs["ask"] and "pwned\\x07" in outputs["ask"] and "\\x1b[31m" in outputs["ask"]
