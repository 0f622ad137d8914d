"""A test run killed before its cleanup must not leave a Milvus server behind.

The servers of :mod:`crag.testing.milvus_server` run in their own process group, so a
``kill -9`` of the test process skipped the ``finally`` that stopped them, and the orphaned
server then broke the next run's server tests. The child now watches its parent and kills its
group when the parent is gone: this test SIGKILLs a process that started a real server and
waits (bounded) for the server's port to close.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

_HOLDER = """
import sys, time
from crag.testing import milvus_server
start = getattr(milvus_server, sys.argv[1])
with start(sys.argv[2]) as uri:
    print(uri, flush=True)
    time.sleep(600)
"""


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _kill_holder_and_wait(kind: str, data: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, kind, str(data)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert holder.stdout is not None
        uri = holder.stdout.readline().strip()  # the holder prints once the server answers
        assert uri.startswith("http://127.0.0.1:"), f"{kind} did not start: {uri!r}"
        port = int(uri.rsplit(":", 1)[1])
        assert _port_open(port)
        os.kill(holder.pid, signal.SIGKILL)  # no cleanup runs in the holder
        holder.wait(timeout=10)
        deadline = time.monotonic() + 30
        while _port_open(port) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _port_open(port), f"{kind} outlived the process that started it (port {port})"
    finally:
        if holder.poll() is None:
            os.killpg(holder.pid, signal.SIGKILL)
        _kill_servers_under(data)  # when the test fails, the survivor must not break later tests


def _kill_servers_under(data: Path) -> None:
    import psutil

    for proc in psutil.process_iter(["cmdline"]):
        if any(str(data) in part for part in proc.info["cmdline"] or ()):
            with contextlib.suppress(psutil.Error):
                proc.kill()


def test_milvus_lite_server_dies_with_its_parent(tmp_path: Path) -> None:
    from crag.testing.milvus_server import lite_available

    if not lite_available():
        pytest.skip("the milvus extra is not installed")
    _kill_holder_and_wait("local_milvus_lite_server", tmp_path / "lite")


def test_milvus_standalone_server_dies_with_its_parent(tmp_path: Path) -> None:
    from crag.testing.milvus_server import available

    if not available():
        pytest.skip("the milvus-server extra is not installed")
    _kill_holder_and_wait("local_milvus_server", tmp_path / "standalone")
