"""A real PostgreSQL server on loopback, for tests and benchmarks of shared state (``kb.state_uri``).

Debian's ``postgresql`` package (``scripts/ci_system_deps.sh`` installs it) carries the server
binaries under ``/usr/lib/postgresql/<version>/bin``. :class:`LocalPostgres` runs ``initdb``
into a fresh temporary folder and ``postgres`` on a free ``127.0.0.1`` port, with a password
(so the tests see that it never leaks) and durability switched off (``fsync=off``: test data,
speed matters more). PostgreSQL refuses to run as root; under root the server runs as the
``postgres`` user the package creates (``nobody`` when there is none), owning its folder.

The server can be stopped and started again on the same port and data, which is how the
tests take the database away from a running ``crag serve`` and give it back.

### Usage example
>>> from crag.testing.postgres_server import LocalPostgres      # doctest: +SKIP
>>> with LocalPostgres() as pg:                                 # doctest: +SKIP
...     url = pg.create_database("kb_test")    # postgresql://crag:...@127.0.0.1:PORT/kb_test
...     pg.stop(); pg.start()                   # the database goes away and comes back
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from crag.errors import StoreError
from crag.testing.net import free_port

__all__ = ["LocalPostgres", "available", "bin_dir"]

USER = "crag"


def bin_dir() -> Path | None:
    """The newest PostgreSQL server binaries installed (``$CRAG_PG_BIN`` first), or None."""
    env = os.environ.get("CRAG_PG_BIN")
    candidates = [env] if env else sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)
    for folder in candidates:
        if folder and (Path(folder) / "initdb").is_file() and (Path(folder) / "postgres").is_file():
            return Path(folder)
    return None


def available() -> bool:
    """True when the PostgreSQL server binaries are installed (``scripts/ci_system_deps.sh``)."""
    return bin_dir() is not None


class LocalPostgres:
    """One PostgreSQL server in its own temporary folder, listening on ``127.0.0.1:port``.

    ``url`` is its maintenance database; :meth:`create_database` makes a fresh one per test.
    The folder is removed when the server is closed.
    """

    def __init__(self, *, start_timeout: float = 60.0) -> None:
        found = bin_dir()
        if found is None:
            raise StoreError(
                "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): run scripts/ci_system_deps.sh",
                backend_id="postgres",
                step="start",
            )
        self.bin = found
        self.start_timeout = start_timeout
        self.password = secrets.token_urlsafe(12)
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="crag-pg-"))
        self.data = self.root / "data"
        self._proc: subprocess.Popen[bytes] | None = None
        self._as: dict[str, Any] = {}
        if os.geteuid() == 0:  # "root execution of the PostgreSQL server is not permitted"
            user = _server_user()
            self._as = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
            os.chown(self.root, user.pw_uid, user.pw_gid)
        self._initdb()

    @property
    def url(self) -> str:
        return self.database_url("postgres")

    def database_url(self, name: str) -> str:
        """The ``postgresql://`` URL of database ``name`` on this server (with the password)."""
        return f"postgresql://{USER}:{self.password}@127.0.0.1:{self.port}/{name}"

    def _initdb(self) -> None:
        pwfile = self.root / "pw"
        pwfile.write_text(self.password)
        if self._as:
            os.chown(pwfile, self._as["user"], self._as["group"])
        cmd = [str(self.bin / "initdb"), "-D", str(self.data), "-U", USER, "-E", "UTF8", "--locale=C.UTF-8"]
        cmd += ["--pwfile", str(pwfile), "--auth-host=scram-sha-256", "--auth-local=trust", "--no-sync"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, **self._as)
        pwfile.unlink()
        if done.returncode != 0:
            raise StoreError(f"initdb failed: {' '.join(done.stderr.split())[-400:]}", backend_id="postgres")

    def start(self) -> None:
        """Start the server (again) on the same port and data; returns once it accepts connections."""
        if self._proc is not None and self._proc.poll() is None:
            return
        log = (self.root / "server.log").open("ab")
        cmd = [str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port)]
        options = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": str(self.root),
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": "200",
            "shared_buffers": "32MB",
        }
        for key, value in options.items():
            cmd += ["-c", f"{key}={value}"]
        # Its own session: a Ctrl-C of the test run does not reach it before the fixture stops it.
        self._proc = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True, **self._as)
        log.close()
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        ready = [str(self.bin / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, "-q"]
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                tail = (self.root / "server.log").read_text("utf-8", "replace")[-400:]
                raise StoreError(f"postgres exited ({self._proc.returncode}): {' '.join(tail.split())}")
            if subprocess.run(ready, capture_output=True, timeout=10).returncode == 0:
                return
            time.sleep(0.1)
        raise StoreError(f"postgres did not accept connections within {self.start_timeout:.0f} s")

    def stop(self) -> None:
        """Stop the server ("fast" shutdown: open sessions are ended), and wait until the port is closed."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _port_open(self.port):
            time.sleep(0.05)

    def create_database(self, name: str) -> str:
        """Create database ``name`` (identifier characters only) and return its URL."""
        if not name.replace("_", "").isalnum():
            raise ValueError(f"database name {name!r}: letters, digits and _ only")
        self.sql(f'CREATE DATABASE "{name}"')
        return self.database_url(name)

    def sql(self, statement: str, database: str = "postgres") -> str:
        """Run one SQL statement through ``psql`` (no Python driver needed); its output."""
        cmd = [str(self.bin / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, "-d", database]
        cmd += ["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-c", statement]
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=60, env={**os.environ, "PGPASSWORD": self.password}
        )
        if done.returncode != 0:
            raise StoreError(f"psql failed: {' '.join(done.stderr.split())}", backend_id="postgres")
        return done.stdout.strip()

    def close(self) -> None:
        """Stop the server and remove its folder."""
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalPostgres:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _server_user() -> pwd.struct_passwd:
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise StoreError("running as root, and there is no 'postgres' or 'nobody' user to run PostgreSQL as")


def _version(folder: str) -> tuple[int, ...]:
    name = Path(folder).parent.name
    return tuple(int(p) for p in name.split(".") if p.isdigit())


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0
