"""A new user's first run: `make demo` in a fresh clone with an empty pip cache, then `pip install crag`.

Targets (issue 13): a fresh ``make demo`` installs ≤ 2.5 GB and finishes in ≤ 9 min on the
2-core machine (before: 4.4 GB, 13 min 12 s, because it installed every extra). Also checks
that the core package alone (no extra) gives a working CLI: ``crag --help``, ``crag ingest``,
``crag ask`` against a hosted (OpenAI-compatible) LLM — a llama.cpp server started on
loopback from the project's own venv — and one-line "pip install 'crag[X]'" errors for
backends whose extra is missing.

    python benchmarks/fresh_install.py [--repo /work/main] [--branch main] [--work /tmp/fresh-demo]
        [--skip-demo] [--out benchmarks/out/fresh_install.json]

Where the time goes is read from the timestamps the run leaves: the llama-cpp-python build
log (built in the background while pip installs the rest), the venv marker and the demo.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GGUF = "qwen2.5-coder-0.5b"


def run(cmd: list[str] | str, cwd: Path, env: dict[str, str], timeout: float, log: Path) -> tuple[int, float]:
    """Run ``cmd`` with output appended to ``log``; return (exit code, seconds)."""
    t0 = time.perf_counter()
    with log.open("a", encoding="utf-8") as f:
        f.write(f"\n$ {cmd if isinstance(cmd, str) else ' '.join(cmd)}\n")
        f.flush()
        p = subprocess.run(cmd, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout,
                           shell=isinstance(cmd, str), check=False)  # fmt: skip
    return p.returncode, round(time.perf_counter() - t0, 1)


def size_mb(path: Path) -> float:
    out = subprocess.run(["du", "-sm", str(path)], capture_output=True, text=True, check=True).stdout
    return float(out.split()[0])


def biggest(site: Path, n: int = 12) -> list[tuple[str, float]]:
    sizes = [(p.name, size_mb(p)) for p in site.iterdir() if p.is_dir() and not p.name.endswith(".dist-info")]
    return sorted(sizes, key=lambda x: -x[1])[:n]


def fresh_demo(args: argparse.Namespace, env: dict[str, str], log: Path) -> dict[str, Any]:
    clone = args.work / "clone"
    subprocess.run(["git", "clone", "-q", "--branch", args.branch, str(args.repo), str(clone)], check=True)
    t0 = time.time()
    code, seconds = run(["make", "demo"], clone, env, 3600, log)
    venv = clone / ".venv"
    phases: dict[str, float] = {}
    build_log = venv / "llama-build.log"
    marker = venv / ".demo"
    if build_log.exists():
        # The log is created when the build starts and last written when it ends.
        phases["venv_and_pip_upgrade"] = round(build_log.stat().st_ctime - t0, 1)
        wheel = next(iter((venv / "wheels").glob("*.whl")), None)
        if wheel is not None:
            phases["llama_cpp_build"] = round(wheel.stat().st_mtime - build_log.stat().st_ctime, 1)
    deps = venv / ".deps"  # touched when pip has installed everything but llama-cpp-python
    if deps.exists():
        phases["pip_install_besides_llama"] = round(deps.stat().st_mtime - t0, 1)
    if marker.exists():
        phases["install_total"] = round(marker.stat().st_mtime - t0, 1)
        phases["demo_script"] = round(t0 + seconds - marker.stat().st_mtime, 1)
    site = next((venv / "lib").glob("python3*/site-packages"))
    return {
        "exit_code": code,
        "wall_seconds": seconds,
        "phases_seconds": phases,
        "venv_mb": size_mb(venv),
        "pip_cache_mb": size_mb(Path(env["PIP_CACHE_DIR"])),
        "biggest_packages_mb": biggest(site),
        "has": {
            m: (site / m).exists()
            for m in ("torch", "playwright", "kubernetes", "milvus", "langchain_core", "llama_index", "fastapi")
        },
    }


def core_only(args: argparse.Namespace, env: dict[str, str], log: Path) -> dict[str, Any]:
    """``pip install crag`` (no extra) in a new venv; the CLI against a hosted LLM."""
    clone, venv = args.work / "clone", args.work / "core-venv"
    checks: dict[str, Any] = {}
    run([sys.executable, "-m", "venv", str(venv)], args.work, env, 600, log)
    code, secs = run([str(venv / "bin" / "pip"), "install", "-q", str(clone)], args.work, env, 3600, log)
    checks["pip_install"] = {"exit_code": code, "seconds": secs, "venv_mb": size_mb(venv)}
    crag = str(venv / "bin" / "crag")
    from crag.llm.models import resolve_gguf
    from crag.testing.net import free_port

    port = free_port()
    server = subprocess.Popen(
        [str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv").exists() else sys.executable,
         "-m", "llama_cpp.server", "--model", str(resolve_gguf(GGUF)), "--port", str(port),
         "--host", "127.0.0.1", "--n_ctx", "4096"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    kb = args.work / "core-kb"
    cfg = args.work / "crag.toml"
    cfg.write_text(
        f'[kb]\npath = "{kb}"\n[llm]\nbackend = "openai"\nmodel = "{GGUF}"\n'
        f'base_url = "http://127.0.0.1:{port}/v1"\nmax_tokens = 64\n[search]\nprovider = "none"\n',
        "utf-8",
    )
    try:
        import httpx

        for _ in range(240):  # the server loads the model
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)

        def crag_cmd(*a: str, timeout: float = 900) -> dict[str, Any]:
            t0 = time.perf_counter()
            p = subprocess.run([crag, *a], cwd=args.work, env=env, capture_output=True, text=True, timeout=timeout)
            return {"exit_code": p.returncode, "seconds": round(time.perf_counter() - t0, 1),
                    "stdout_tail": p.stdout.strip()[-300:], "stderr": p.stderr.strip()[-400:]}  # fmt: skip

        checks["help"] = crag_cmd("--help")
        checks["ingest"] = crag_cmd("ingest", str(clone / "data" / "sample" / "internal"), "-c", str(cfg))
        question = "When was the Royal University of Warsaw established?"
        checks["ask"] = crag_cmd("ask", question, "-c", str(cfg), "--json")
        checks["serve_without_server_extra"] = crag_cmd("serve", "-c", str(cfg), timeout=60)
        local = args.work / "crag-local.toml"  # the embedded runtime, which the core does not install
        gguf = resolve_gguf(GGUF)
        local.write_text(f'[kb]\npath = "{kb}"\n[llm]\nbackend = "llama-cpp"\nmodel = "{gguf}"\n', "utf-8")
        checks["local_llm_without_local_extra"] = crag_cmd("ask", question, "-c", str(local))
    finally:
        server.terminate()
        server.wait(timeout=30)
    return checks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", type=Path, default=ROOT)
    ap.add_argument("--branch", default="main")
    ap.add_argument("--work", type=Path, default=Path("/tmp/fresh-demo"))
    ap.add_argument("--skip-demo", action="store_true", help="reuse the clone and its .venv of an earlier run")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "fresh_install.json")
    args = ap.parse_args()
    if not args.skip_demo:
        shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True, exist_ok=True)
    log = args.work / "run.log"
    cache = Path(tempfile.mkdtemp(prefix="pip-cache-", dir=args.work))  # empty: every package is downloaded
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "CRAG_CACHE_DIR")}
    env |= {"PIP_CACHE_DIR": str(cache), "PATH": "/usr/local/bin:/usr/bin:/bin"}
    result: dict[str, Any] = {"repo": str(args.repo), "branch": args.branch, "cpus": os.cpu_count()}
    result["load_average_before"] = os.getloadavg()
    if not args.skip_demo:
        result["make_demo"] = fresh_demo(args, env, log)
    result["core_only"] = core_only(args, env, log)
    result["load_average_after"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, ensure_ascii=False, indent=2) + "\n", "utf-8")
    print(json.dumps(result, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
