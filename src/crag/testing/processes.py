"""Run crag as separate OS processes, the way users do: ``crag serve`` and the ``crag`` CLI.

Multi-process tests and benchmarks need real processes (each with its own vector store
client), bounded waits, and no process left behind. ``crag serve`` runs in its own process
group so its uvicorn workers are stopped with it.

### Usage example
>>> with crag_serve("kb", env={"CRAG_LLM__BACKEND": "openai"}) as url:    # doctest: +SKIP
...     httpx.post(f"{url}/v1/ask", json={"question": "What is CRAG?", "mode": "rag"}).status_code
200
>>> crag_cli("ingest", "new.txt", "--kb", "kb").returncode                # doctest: +SKIP
0
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

from crag.testing.net import free_port


def crag_cli(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``crag ARGS`` in a new interpreter (the current ``sys.executable``) and wait."""
    return subprocess.run(
        [sys.executable, "-m", "crag.cli", *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextmanager
def crag_serve(
    kb: str | Path,
    *,
    workers: int = 1,
    env: Mapping[str, str] | None = None,
    timeout: float = 120.0,
    log: Path | None = None,
) -> Iterator[str]:
    """Start ``crag serve --kb KB`` on a free loopback port; yield its URL once /healthz answers."""
    port = free_port()
    out = log.open("w") if log else subprocess.DEVNULL
    proc = subprocess.Popen(
        [sys.executable, "-m", "crag.cli", "serve", "--kb", str(kb), "--port", str(port), "--workers", str(workers)],
        env={**os.environ, **(env or {})},
        stdout=out,
        stderr=subprocess.STDOUT if log else subprocess.DEVNULL,
        start_new_session=True,  # its own group: uvicorn's workers go down with it
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(proc, f"{url}/healthz", timeout, "crag serve")
        yield url
    finally:
        stop_group(proc)
        if not isinstance(out, int):  # a log file we opened (DEVNULL is an int)
            out.close()


def wait_ready(proc: subprocess.Popen[bytes] | subprocess.Popen[str], url: str, timeout: float, what: str) -> None:
    """Wait until GET ``url`` answers 200; ``RuntimeError`` if ``proc`` exits or ``timeout`` passes first."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before answering {url}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not answer {url} within {timeout:g}s")
        time.sleep(0.2)


def stop_group(proc: subprocess.Popen[bytes] | subprocess.Popen[str], grace: float = 10.0) -> None:
    """SIGTERM the process group (uvicorn shuts down cleanly), SIGKILL it after ``grace``."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        try:  # the leader is gone; its workers may still be finishing
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.5)


def read_only_prefix(folder: Path) -> list[str] | None:
    """A command prefix under which ``folder`` is read-only; ``None`` when that is impossible.

    Root ignores permission bits, so as root the command runs in a private mount namespace
    with a read-only bind mount of the folder (``unshare -m``); otherwise the folder is
    ``chmod -R a-w`` (restore it with ``chmod -R u+w`` afterwards).
    """
    if os.geteuid() != 0:
        subprocess.run(["chmod", "-R", "a-w", str(folder)], check=True)
        return []
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode:
        return None
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    return ["unshare", "-m", "sh", "-c", script, str(folder)]
