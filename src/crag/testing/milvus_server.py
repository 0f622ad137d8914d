"""A real Milvus standalone server on loopback, for tests and benchmarks.

Milvus Lite is an embedded engine; a deployment talks to a Milvus *server* over gRPC. The
``milvus`` package on PyPI (Apache-2.0, "milvus-server") carries a standalone Milvus binary
with its embedded etcd and local storage, so the server path of
:class:`crag.store.milvus.MilvusVectorStore` can be exercised on a machine without Docker or
internet. The server runs in its own process group (its launcher changes directory and
forks the binary), bound to free ports, and is killed on exit.

:func:`local_milvus_lite_server` starts Milvus Lite's own gRPC server instead
(``python -m milvus_lite server``, from the ``milvus-lite`` package of ``crag[milvus]``): the
protocol of a Milvus >= 2.5 cluster, with BM25 full-text search (``kb.keyword_index = "store"``),
which the older standalone binary lacks.

### Usage example
>>> from crag.testing.milvus_server import local_milvus_server        # doctest: +SKIP
>>> with local_milvus_server("/tmp/milvus-data") as uri:              # doctest: +SKIP
...     store = MilvusVectorStore(uri, collection="kb_test")
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from crag.errors import StoreError
from crag.testing.net import free_port

# Both servers run in their own process group, so a test run killed before its cleanup (a
# timeout, Ctrl-C twice, SIGKILL) would leave them serving, and the next run's servers would
# fail beside them. A watcher thread in the child kills the whole group once the parent that
# started it is gone (the child is then re-parented, so its parent pid changes).
_WATCH_PARENT = """
import os, signal, threading, time
def _watch(parent):
    while os.getppid() == parent:
        time.sleep(1)
    os.killpg(0, signal.SIGKILL)
threading.Thread(target=_watch, args=(int(os.environ["CRAG_TEST_PARENT"]),), daemon=True).start()
"""

# Runs in the child: start the server on the given port and stay alive until killed.
_LAUNCH = (
    _WATCH_PARENT
    + """
import sys, time
from milvus import MilvusServer
server = MilvusServer(wait_for_started=True)
server.show_startup_banner = False
server.set_base_dir(sys.argv[1])
server.listen_port = int(sys.argv[2])
server.start()
print("ready", flush=True)
while server.running:
    time.sleep(1)
"""
)

# Runs Milvus Lite's `python -m milvus_lite server …` under the same watcher.
_LAUNCH_LITE = (
    _WATCH_PARENT
    + """
import runpy, sys
sys.argv = ["milvus_lite", *sys.argv[1:]]
runpy.run_module("milvus_lite", run_name="__main__", alter_sys=True)
"""
)


def _child_env() -> dict[str, str]:
    return {**os.environ, "CRAG_TEST_PARENT": str(os.getpid())}


def available() -> bool:
    """True when the ``milvus`` server package is installed (``pip install 'crag[milvus-server]'``)."""
    return importlib.util.find_spec("milvus") is not None


@contextmanager
def local_milvus_server(data_dir: str | Path, *, timeout: float = 240.0) -> Iterator[str]:
    """Start a standalone Milvus server storing under ``data_dir``; yield its ``http://`` URI."""
    if not available():
        raise StoreError(
            "the Milvus server package is not installed: pip install 'crag[milvus-server]'",
            backend_id="milvus",
            step="start",
        )
    data = Path(data_dir)
    data.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = (data / "launcher.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-c", _LAUNCH, str(data), str(port)],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        start_new_session=True,  # one process group: the launcher and the milvus binary
        env=_child_env(),
    )
    try:
        _wait_ready(proc, port, timeout, data / "launcher.log")
        yield f"http://127.0.0.1:{port}"
    finally:
        _kill_group(proc)
        log.close()


def lite_available() -> bool:
    """True when Milvus Lite (with its gRPC server) is installed (``pip install 'crag[milvus]'``)."""
    return importlib.util.find_spec("milvus_lite.adapter.grpc.server") is not None


@contextmanager
def local_milvus_lite_server(data_dir: str | Path, *, timeout: float = 120.0) -> Iterator[str]:
    """Start Milvus Lite's gRPC server storing under ``data_dir``; yield its ``http://`` URI."""
    if not lite_available():
        raise StoreError(
            "Milvus Lite's gRPC server is not installed: pip install 'crag[milvus]'", backend_id="milvus", step="start"
        )
    data = Path(data_dir)
    data.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = (data / "server.log").open("w")
    args = ["-c", _LAUNCH_LITE, "server", "--data-dir", str(data), "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(
        [sys.executable, *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env=_child_env(),
    )
    try:
        deadline = time.monotonic() + timeout
        while True:  # bounded: ready once the gRPC port accepts connections
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() >= deadline:
                tail = (data / "server.log").read_text("utf-8", "replace")[-400:]
                raise StoreError(
                    f"Milvus Lite server did not start (exit {proc.poll()}): {' '.join(tail.split())}",
                    backend_id="milvus",
                    step="start",
                )
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        _kill_group(proc)
        log.close()


def _wait_ready(proc: subprocess.Popen[str], port: int, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    # The launcher prints "ready" once Milvus's own (bounded) health check passes; a banner may
    # come first. EOF means it died.
    line = proc.stdout.readline()
    while line and line.strip() != "ready":
        line = proc.stdout.readline()
    if line.strip() != "ready":
        tail = log.read_text("utf-8", "replace")[-400:] if log.exists() else ""
        raise StoreError(
            f"Milvus server did not start (exit {proc.poll()}; logs in {log.parent / 'logs'}): "
            f"{' '.join(tail.split())}",
            backend_id="milvus",
            step="start",
        )
    while time.monotonic() < deadline:  # bounded: the gRPC port must also accept connections
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise StoreError(f"Milvus server port {port} not open after {timeout:.0f}s", backend_id="milvus", step="start")


def _kill_group(proc: subprocess.Popen[str]) -> None:
    # SIGTERM lets Milvus shut down cleanly, but the launcher dies first and the binary may
    # linger in its shutdown: wait (bounded) for the whole group to go, then SIGKILL it.
    for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _group_alive(proc.pid):
            proc.poll()  # reap the launcher: a zombie still counts as a group member
            time.sleep(0.2)
        if not _group_alive(proc.pid):
            break
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
