"""Seeded large text files of mixed Chinese and English sentences (tests and benchmarks).

Sentences are assembled from word lists, so every paragraph differs (no chunk repeats, no
cache hit), and the same seed writes the same bytes. Paragraphs are separated by blank lines,
with a few long single-line stretches so that block cutting sees every case.

### Usage example
>>> import tempfile, pathlib
>>> path = write_mixed_text(pathlib.Path(tempfile.mkdtemp()) / "big.txt", 20_000, seed=1)
>>> 19_990 <= path.stat().st_size <= 20_000  # a cut-off character is dropped
True
"""

from __future__ import annotations

import random
from pathlib import Path

__all__ = ["write_mixed_text"]

_EN = (
    "the river bridge museum library university history science student city court market music garden "
    "harbour railway engine council festival mountain forest village treaty archive theatre observatory"
).split()
_ZH = (
    "北京 上海 长江 黄河 大学 图书馆 博物馆 历史 科学 学生 城市 法院 "
    "市场 音乐 花园 港口 铁路 山脉 森林 村庄 条约 档案 剧院 天文台"
).split()
_ZH_GLUE = "是 在 有 和 的 位于 建于 属于 连接 拥有".split()


def _en_sentence(rng: random.Random) -> str:
    words = [rng.choice(_EN) for _ in range(rng.randint(8, 20))]
    return " ".join(words).capitalize() + f" in {rng.randint(1000, 2024)}."


def _zh_sentence(rng: random.Random) -> str:
    parts = [rng.choice(_ZH) + rng.choice(_ZH_GLUE) for _ in range(rng.randint(4, 10))]
    return "".join(parts) + f"{rng.randint(1, 999)}号" + rng.choice("。！？")


def write_mixed_text(path: Path, size: int, *, seed: int = 0) -> Path:
    """Write ``size`` bytes of mixed zh/en paragraphs (UTF-8; a character that would be cut
    off at the end is left out) to ``path``; return it."""
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        while written < size:
            n = rng.randint(2, 8)
            sentences = [_zh_sentence(rng) if rng.random() < 0.5 else _en_sentence(rng) for _ in range(n)]
            sep = "" if rng.random() < 0.05 else "\n"  # now and then a paragraph runs on for long
            para = " ".join(sentences) + ("\n" + sep if sep else " ")
            data = para.encode("utf-8")
            if written + len(data) > size:
                data = data[: size - written].decode("utf-8", "ignore").encode("utf-8")
                if not data:
                    break
            fh.write(data.decode("utf-8"))
            written += len(data)
    return path
