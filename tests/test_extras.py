"""Every backend that needs an optional extra names it in one line when it is missing.

A missing package is simulated by ``sys.modules[name] = None`` (Python then refuses to
import it, as if it were not installed); ``benchmarks/fresh_install.py`` checks the same in
a real core-only virtualenv.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from crag.errors import CragError
from crag.extras import EXTRAS, require

pytestmark = pytest.mark.unit


def hide(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Make ``names`` (and their loaded submodules) unimportable for this test."""
    for name in names:
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.setitem(sys.modules, loaded, None)
        monkeypatch.setitem(sys.modules, name, None)


def _llama(tmp: Path) -> None:
    from crag.llm.llama_cpp import LlamaCppLLM

    gguf = tmp / "tiny.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))
    LlamaCppLLM(str(gguf)).warm_up()


def _bundled_model(tmp: Path) -> None:
    from crag.llm.models import BundledModel, resolve_gguf

    spec = BundledModel("qwen-test", ("crag_no_such_part1",), 1, "0" * 64, "model")
    resolve_gguf("qwen-test", bundled={"qwen-test": spec}, models_dir=tmp)


def _st(tmp: Path) -> None:
    from crag.embed.sentence_transformers import SentenceTransformerEmbedder

    SentenceTransformerEmbedder().warm_up()


def _ddg(tmp: Path) -> None:
    from crag.search.duckduckgo import DuckDuckGoSearch

    DuckDuckGoSearch(timeout=2).search("crag", k=1)


def _otel(tmp: Path) -> None:
    from crag.trace.otel import _sdk

    _sdk()


def _langchain(tmp: Path) -> None:
    from crag.integrations import require as integration_require

    integration_require("langchain_core.retrievers", "langchain")


def _llamaindex(tmp: Path) -> None:
    from crag.integrations import require as integration_require

    integration_require("llama_index.core.retrievers", "llamaindex")


def _plot(tmp: Path) -> None:
    from crag.grade.calibrate import reliability_plot

    reliability_plot([0, 1], [0.2, 0.8], tmp / "r.png")


def _milvus(tmp: Path) -> None:
    from crag.store.milvus import MilvusVectorStore

    MilvusVectorStore(tmp / "m.db", dim=4).warm_up()


def _milvus_server(tmp: Path) -> None:
    from crag.testing.milvus_server import local_milvus_server

    with local_milvus_server(tmp):
        pass


def _postgres(tmp: Path) -> None:
    from crag.state import TRACES, StateDB

    StateDB("postgresql://crag@127.0.0.1:1/crag", TRACES, scope="kb").ping()


CASES: list[tuple[str, tuple[str, ...], Callable[[Path], Any]]] = [
    ("local", ("llama_cpp",), _llama),
    ("model", (), _bundled_model),
    ("st", ("sentence_transformers",), _st),
    ("web", ("ddgs",), _ddg),
    ("otel", ("opentelemetry",), _otel),
    ("langchain", ("langchain_core",), _langchain),
    ("llamaindex", ("llama_index",), _llamaindex),
    ("eval", ("matplotlib",), _plot),
    ("milvus", ("pymilvus",), _milvus),
    ("milvus-server", ("milvus",), _milvus_server),
    ("postgres", ("psycopg",), _postgres),
]


@pytest.mark.parametrize(("extra", "modules", "use"), CASES, ids=[c[0] for c in CASES])
def test_missing_extra_is_named_in_one_line(
    extra: str, modules: tuple[str, ...], use: Callable[[Path], Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if extra == "milvus-server":  # the package is found by spec, not imported
        monkeypatch.setattr("crag.testing.milvus_server.available", lambda: False)
    hide(monkeypatch, *modules)
    with pytest.raises(CragError) as info:
        use(tmp_path)
    message = str(info.value)
    assert f"pip install 'crag[{extra}]'" in message and "\n" not in message, message


def test_every_extra_of_pyproject_is_described() -> None:
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text("utf-8"))
    extras = set(pyproject["project"]["optional-dependencies"]) - {"dev"}
    assert extras == set(EXTRAS) and {c[0] for c in CASES} | {"model-small", "server"} == extras


def test_crag_serve_without_the_server_extra_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from crag.cli import app

    hide(monkeypatch, "uvicorn")
    result = CliRunner().invoke(app, ["serve", "--kb", str(tmp_path / "kb")])
    assert result.exit_code == 2
    assert result.output.strip() == (
        "error: crag serve needs uvicorn from the 'server' extra: pip install 'crag[server]'"
    )
    hide(monkeypatch, "crag.server.app", "fastapi")
    import crag.server

    monkeypatch.delattr(crag.server, "app", raising=False)  # set when another test imported it
    with pytest.raises(ImportError, match=r"pip install 'crag\[server\]'"):
        crag.server.create_app  # noqa: B018  (the lazy attribute imports the app)


def test_calibrate_without_matplotlib_still_writes_thresholds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from crag.cli import app

    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        "".join(
            f'{{"query": "what is crag", "passage": "{p}", "label": {lab}}}\n'
            for p, lab in [("crag corrects retrieval", 1), ("bm25 ranks words", 0)] * 3
        ),
        "utf-8",
    )
    hide(monkeypatch, "matplotlib")
    args = ["calibrate", "--labels", str(labels), "--evaluator", "heuristic", "--plot", str(tmp_path / "r.png")]
    result = CliRunner().invoke(app, [*args, "--kb", str(tmp_path / "kb")])
    assert result.exit_code == 0, result.output
    assert "pip install 'crag[eval]'" in result.output and "auroc" in result.output
    assert not (tmp_path / "r.png").exists()


def test_require_returns_the_module() -> None:
    assert require("json", "server", "x").__name__ == "json"


# Top-level modules that only extras install (torch comes with st). Not listed: what the core's
# chromadb pulls in anyway (uvicorn, the OpenTelemetry SDK, onnxruntime, kubernetes).
EXTRA_MODULES = (
    "llama_cpp", "sentence_transformers", "torch", "transformers", "ddgs", "trafilatura", "fastapi",
    "multipart", "prometheus_client", "opentelemetry.exporter.otlp.proto.http", "langchain_core", "llama_index",
    "matplotlib", "scipy",
    "pymilvus", "milvus", "milvus_lite", "playwright", "openai", "schemathesis", "hypothesis",
)  # fmt: skip
BLOCKED_CLI = (
    "import sys\n"
    "for m in {mods!r}: sys.modules[m] = None\n"  # as if `pip install crag` with no extra
    "from crag.cli import app\n"
    "app(sys.argv[1:], prog_name='crag')\n"
)


@pytest.mark.integration
def test_core_cli_works_without_any_extra(tmp_path: Path) -> None:
    import subprocess

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "note.md").write_text("# CRAG\n\nCRAG grades retrieved documents before answering.\n", "utf-8")
    code = BLOCKED_CLI.format(mods=EXTRA_MODULES)

    def crag(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, cwd=tmp_path
        )

    assert crag("--help").returncode == 0
    ingest = crag("ingest", str(docs), "--kb", str(tmp_path / "kb"))
    assert ingest.returncode == 0, ingest.stderr
    listed = crag("trace", "list", "--kb", str(tmp_path / "kb"))
    assert listed.returncode == 0, listed.stderr
    serve = crag("serve", "--kb", str(tmp_path / "kb"))
    assert serve.returncode == 2 and "pip install 'crag[server]'" in serve.stderr
    assert len(serve.stderr.strip().splitlines()) == 1
    ask = crag("ask", "What does CRAG grade?", "--kb", str(tmp_path / "kb"))  # default LLM: embedded
    assert ask.returncode == 2 and "pip install 'crag[local]'" in ask.stderr, ask.stderr
