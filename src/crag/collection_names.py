"""What may name a collection: a collection's name is an OpenAI chat model id and part of URLs.

Letters (any script), digits, ``_ . -``; ``rag`` is the chat endpoint's name for the plain
baseline. It imports nothing from crag, so settings, the CLI and the server all check names here.

>>> check_collection_name("handbook"), check_collection_name("手册")
('handbook', '手册')
"""

from __future__ import annotations

import re

__all__ = ["COLLECTION_NAME", "RESERVED_NAMES", "SINGLE_COLLECTION", "check_collection_name"]

COLLECTION_NAME = re.compile(r"[^\W_][\w.\-]{0,63}")
RESERVED_NAMES = ("rag",)
SINGLE_COLLECTION = "crag"  # the name of kb.path when a server holds no named collections


def check_collection_name(name: str) -> str:
    """``name`` when it can name a collection, else ``ValueError`` saying why."""
    if not COLLECTION_NAME.fullmatch(name):
        raise ValueError(
            f"collection name {name!r}: use letters, digits, _ . - (a letter or digit first, at most 64 characters)"
        )
    if name.lower() in RESERVED_NAMES:
        raise ValueError(f"collection name {name!r} is reserved (model 'rag' runs the plain baseline)")
    return name
