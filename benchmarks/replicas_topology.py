"""The topology of ``benchmarks/replicas.py`` as local processes: one PostgreSQL, one Milvus
server, a stub OpenAI-compatible model server and N ``crag serve --shared`` replicas.

It is the deployment of ``docs/deploy.md`` without Docker: every service listens on
127.0.0.1, each replica has its own empty working folder and the same ``kb.name``,
``kb.state_uri`` and ``kb.store_uri`` (given as ``CRAG_*`` environment variables, as the
compose file does). Every wait is bounded; :class:`Topology` stops everything it started.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from crag.testing.milvus_server import local_milvus_lite_server
from crag.testing.net import free_port
from crag.testing.postgres_server import LocalPostgres
from crag.testing.processes import stop_group, wait_ready
from crag.testing.stubs import StubLLM, StubSearch, _json

SOURCE_1 = re.compile(r'<source id="1"[^>]*>\n(.*?)\n</source>', re.S)

START_TIMEOUT = 300.0  # a replica loads the embedder and the evaluator; the machine may be busy


class QuoteLLM(StubLLM):
    """An OpenAI-compatible model server that answers with the first sentence of source [1], cited.

    No model runs, so the load is the engine's (embedding, Milvus, PostgreSQL, evaluator, traces);
    the answer still quotes its source, so the claim check passes and answers are cached. Usage
    reports about four characters a token, as a real server would count the prompt.
    """

    def reply(self, method: str, path: str, body: bytes) -> tuple[int, str, bytes]:
        request = json.loads(body or b"{}")
        if not path.rstrip("/").endswith("/chat/completions") or "response_format" in request:
            return super().reply(method, path, body)
        messages = request.get("messages") or [{}]
        prompt = "".join(str(m.get("content", "")) for m in messages)
        found = SOURCE_1.search(str(messages[-1].get("content", "")))
        first = re.split(r"(?<=[.。])\s+", found.group(1).strip())[0].rstrip(".。") if found else "Yes"
        payload = {
            "id": "quote-1",
            "object": "chat.completion",
            "model": request.get("model", "stub"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": f"{first} [1]."}}],
            "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": 12},
        }
        return _json(200, payload)


@dataclass
class Replica:
    """One ``crag serve`` process: its URL, its folder and its process (for ``kill -9``)."""

    name: str
    url: str
    folder: Path
    proc: subprocess.Popen[bytes]
    log: Path

    def kill9(self) -> None:
        """``kill -9`` of the server's whole process group: no shutdown, no cleanup."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)


@dataclass
class Topology:
    """What :func:`topology` started; ``replicas`` are added by :meth:`start_replicas`."""

    pg: LocalPostgres
    state_uri: str
    milvus_uri: str
    llm: StubLLM
    web: StubSearch
    root: Path
    replicas: list[Replica] = field(default_factory=list)
    stack: ExitStack = field(default_factory=ExitStack)

    def env(self, kb_name: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The ``CRAG_*`` settings every replica of knowledge base ``kb_name`` shares."""
        port = self.milvus_uri.rsplit(":", 1)[1]
        return {
            "CRAG_KB__NAME": kb_name,
            "CRAG_KB__STATE_URI": self.state_uri,
            "CRAG_KB__STATE_TIMEOUT": "1.5",
            "CRAG_KB__STORE_URI": f"milvus://127.0.0.1:{port}?collection=kb_{kb_name}",
            "CRAG_KB__KEYWORD_INDEX": "store",
            "CRAG_LLM__BACKEND": "openai",
            "CRAG_LLM__BASE_URL": self.llm.url,
            "CRAG_LLM__TIMEOUT": "30",
            "CRAG_SEARCH__PROVIDER": "tavily",
            "CRAG_SEARCH__TAVILY_URL": self.web.url,
            "TAVILY_API_KEY": "tvly-benchmark-not-real",
            "CRAG_EVALUATOR__UPPER": "0.5",
            "CRAG_CORRECTION__VERIFY_CORRECT": "false",  # the stub has no log-probabilities to verify with
            "CRAG_CORRECTION__ANSWER_CACHE_TTL": "3600",
            "CRAG_CORRECTION__DEADLINE_SECONDS": "60",
            **(extra or {}),
        }

    def start_replicas(self, n: int, kb_name: str, extra: Mapping[str, str] | None = None) -> list[Replica]:
        """Start ``n`` replicas (in parallel: each loads its models) and wait until each answers /readyz."""
        started = []
        for _ in range(n):
            i = len(self.replicas) + 1
            folder = self.root / f"replica{i}"
            folder.mkdir()
            port = free_port()
            folder_kb, where = str(folder / "kb"), ["--host", "127.0.0.1", "--port", str(port)]
            log = self.root / f"replica{i}.log"
            with log.open("wb") as out:
                proc = subprocess.Popen(
                    # every replica also takes queued ingest jobs: an upload is answered 202 with a job id
                    [sys.executable, "-m", "crag.cli", "serve", "--shared", "--worker", "--kb", folder_kb, *where],
                    env={**os.environ, **self.env(kb_name, extra)},
                    cwd=folder,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own group: kill -9 takes the whole server
                )
            replica = Replica(f"replica{i}", f"http://127.0.0.1:{port}", folder, proc, log)
            self.replicas.append(replica)
            self.stack.callback(stop_group, proc)
            started.append(replica)
        for replica in started:
            try:
                wait_ready(replica.proc, f"{replica.url}/readyz", START_TIMEOUT, replica.name)
            except RuntimeError as exc:
                tail = replica.log.read_text("utf-8", "replace")[-1500:]
                raise RuntimeError(f"{exc}\n{tail}") from None
        return started

    def stop_replicas(self, replicas: list[Replica]) -> None:
        for replica in replicas:
            stop_group(replica.proc)


@contextmanager
def topology() -> Iterator[Topology]:
    """Start PostgreSQL, a Milvus Lite gRPC server and the stub model server; stop them on exit."""
    root = Path(tempfile.mkdtemp(prefix="crag-replicas-"))
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, root, ignore_errors=True)  # last: after every process stopped
        pg = stack.enter_context(LocalPostgres())
        state_uri = pg.create_database("crag")
        milvus_uri = stack.enter_context(local_milvus_lite_server(root / "milvus"))
        llm = stack.enter_context(QuoteLLM())
        web = stack.enter_context(StubSearch())
        topo = Topology(pg, state_uri, milvus_uri, llm, web, root)
        stack.enter_context(topo.stack)  # replicas stop first, the services after them
        yield topo
