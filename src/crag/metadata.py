"""Document metadata and the filters that scope a question by it.

Metadata is a flat map of string keys to **string values**, fixed once at ingest
(:func:`normalize_metadata`): numbers and booleans become their JSON text (``2024``,
``true``), dates their ISO form, nested objects dotted keys, lists JSON text. Filters
compare strings for equality, so ``{"year": "2024"}`` and ``{"year": 2024}`` mean the
same, on every store.

A filter is ``{key: values}``: a document matches when, for every key, its value is one
of the values (different keys AND, the values of one key OR). ``source``, ``title`` and
``url`` name the document's own fields; any other key names a metadata field.

>>> parse_filters({"lang": "zh", "team": {"$in": ["产品", "support"]}, "year": 2024})
{'lang': ('zh',), 'team': ('产品', 'support'), 'year': ('2024',)}
>>> parse_pairs(["lang=zh", "team=产品", "lang=en"], option="--filter")
{'lang': ('zh', 'en'), 'team': ('产品',)}

A filter is small (:data:`MAX_FILTER_KEYS` keys, :data:`MAX_FILTER_VALUES` values in all) and
names keys the knowledge base has (:func:`check_filters`): a key no document carries is a
mistake (``tema`` for ``team``), never a silent empty search.

>>> check_filters({"tema": "hr"}, known={"team", "lang"})
Traceback (most recent call last):
crag.errors.InputError: filters key 'tema' is not a field of any document; known keys: lang, source, team, title, url
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from crag.errors import InputError
from crag.types import Chunk

__all__ = [
    "CHUNK_FIELDS",
    "MAX_FILTER_KEYS",
    "MAX_FILTER_VALUES",
    "MAX_VALUE_CHARS",
    "Filters",
    "check_filters",
    "check_key",
    "check_metadata",
    "chunk_fields",
    "describe",
    "fingerprint",
    "is_key",
    "meta_value",
    "normalize_metadata",
    "parse_filters",
    "parse_meta",
    "parse_pairs",
    "store_metadata",
]

Filters = dict[str, tuple[str, ...]]
"""Key -> the values a document's field may take (one value: equality)."""

# Keys a filter may name: a letter or underscore first (Chinese letters too), then word
# characters, dots (the dotted keys of nested JSONL metadata) and hyphens. Every store can
# address such a key (Chroma metadata, Milvus dynamic fields, SQLite JSON paths).
_KEY = re.compile(r"[^\W\d][\w.\-]{0,63}")
CHUNK_FIELDS = ("source", "title", "url")  # a filter on these reads the document's own field
_STORE_RESERVED = {*CHUNK_FIELDS, "id", "text", "vector", "sparse"}  # columns of the stores
MAX_VALUE_CHARS = 1000  # a metadata value given on the command line or over HTTP
# A filter's size. Every store turns a filter into one expression (Chroma's where, Milvus'
# filter, the manifest's SQL); thousands of keys crashed Chroma's Rust bindings and made
# SQLite's expression tree too deep. Real scopes name a few fields and a few values.
MAX_FILTER_KEYS = 10  # keys of one filter
MAX_FILTER_VALUES = 100  # values of one filter, all keys together
_LISTED_KEYS = 30  # known keys an error message names


def is_key(key: object) -> bool:
    """True for a key a filter can name (see the module docstring)."""
    return isinstance(key, str) and _KEY.fullmatch(key) is not None


def check_key(key: object, what: str) -> str:
    """``key`` when it can be a metadata key, else an ``InputError`` naming ``what``."""
    if not is_key(key):
        raise InputError(
            f"{what} key {key!r} is not a metadata key: start with a letter or _, then letters, digits, _ . - "
            "(at most 64 characters)"
        )
    return str(key)


def meta_value(value: Any) -> str:
    """One metadata value as the string every store compares.

    >>> [meta_value(v) for v in ("产品", 2024, 1.5, True, dt.date(2024, 5, 1))]
    ['产品', '2024', '1.5', 'true', '2024-05-01']
    """
    if isinstance(value, str):
        return value
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def normalize_metadata(meta: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A document's metadata as flat string values: nested maps become dotted keys, nulls go.

    >>> normalize_metadata({"lang": "zh", "n": 2, "tags": ["a"], "x": None, "nested": {"k": True}})
    {'lang': 'zh', 'n': '2', 'tags': '["a"]', 'nested.k': 'true'}
    """
    flat: dict[str, str] = {}
    for key, value in meta.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(normalize_metadata(value, f"{name}."))
        elif value is not None:
            flat[name] = meta_value(value)
    return flat


def check_metadata(meta: Mapping[str, Any] | None, *, what: str = "metadata") -> dict[str, str]:
    """Metadata given for an ingest (``--meta``, an API field), normalised and checked.

    >>> check_metadata({"team": "产品", "year": 2024})
    {'team': '产品', 'year': '2024'}
    """
    flat = normalize_metadata(meta or {})
    for key, value in flat.items():
        _check_value(value, what, check_key(key, what))
    return flat


def store_metadata(meta: Mapping[str, str]) -> dict[str, str]:
    """The fields a vector store keeps for filtering: filterable keys that are not its own columns."""
    return {k: v for k, v in meta.items() if is_key(k) and k not in _STORE_RESERVED and v != ""}


def chunk_fields(chunk: Chunk, *, with_text: bool = False) -> dict[str, Any]:
    """What a vector store keeps beside a chunk's vector: its filterable metadata, then its
    own ``source``/``title``/``url`` (which win a clash), and its text for a store that ranks
    keywords itself."""
    fields: dict[str, Any] = {
        **store_metadata(chunk.metadata),
        "source": chunk.source,
        "title": chunk.title[:200],
        "url": chunk.url,
    }
    if with_text:
        fields["text"] = chunk.text
    return fields


def fingerprint(meta: Mapping[str, str]) -> str:
    """A short stable hash of metadata ("" for none), for chunk ids and file versions.

    >>> fingerprint({}), fingerprint({"b": "2", "a": "1"}) == fingerprint({"a": "1", "b": "2"})
    ('', True)
    """
    if not meta:
        return ""
    canon = json.dumps(dict(meta), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:16]


def parse_pairs(items: Iterable[str], *, option: str) -> dict[str, tuple[str, ...]]:
    """``KEY=VALUE`` strings (``--meta``, ``--filter``, form fields) as key -> values, in order.

    A key given twice keeps both values (a filter then matches either). Raises ``InputError``
    naming ``option`` for an item without ``=``, a bad key or an over-long value.
    """
    out: dict[str, tuple[str, ...]] = {}
    for item in items:
        key, sep, value = str(item).partition("=")
        if not sep:
            raise InputError(f"{option} {item!r} is not KEY=VALUE; write e.g. {option} lang=zh")
        key = check_key(key.strip(), option)
        _check_value(value, option, key)
        if value not in out.get(key, ()):
            out[key] = (*out.get(key, ()), value)
    return out


def parse_meta(items: Iterable[str], *, option: str = "--meta") -> dict[str, str]:
    """``KEY=VALUE`` strings as metadata: one value per key (``InputError`` for a key given twice).

    >>> parse_meta(["team=产品", "year=2024"])
    {'team': '产品', 'year': '2024'}
    """
    pairs = parse_pairs(items, option=option)
    twice = [k for k, v in pairs.items() if len(v) > 1]
    if twice:
        raise InputError(f"{option} {twice[0]!r} is given twice with different values; give each key once")
    return {k: v[0] for k, v in pairs.items()}


def parse_filters(raw: Mapping[str, Any] | None, *, what: str = "filter") -> Filters:
    """Filters from a JSON-like map: ``{"key": "v"}``, ``{"key": ["a", "b"]}`` or ``{"key": {"$in": [...]}}``.

    Values are strings; numbers and booleans are accepted and compared as their JSON text.
    Raises ``InputError`` naming the key for anything else.
    """
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InputError(f'{what} must be an object of key: value, e.g. {{"lang": "zh"}}')
    if len(raw) > MAX_FILTER_KEYS:
        raise InputError(f"{what} has {len(raw):,} keys; the limit is {MAX_FILTER_KEYS}: scope by fewer fields")
    out: Filters = {}
    total = 0
    for key, spec in raw.items():
        key = check_key(key, what)
        if isinstance(spec, Mapping):
            if set(spec) != {"$in"}:
                raise InputError(f'{what} {key!r}: the only operator is "$in", e.g. {{"$in": ["a", "b"]}}')
            spec = spec["$in"]
        values = list(spec) if isinstance(spec, (list, tuple)) else [spec]
        total += len(values)
        if not values or len(values) > MAX_FILTER_VALUES:
            raise InputError(f"{what} {key!r} needs 1 to {MAX_FILTER_VALUES} values, got {len(values):,}")
        if total > MAX_FILTER_VALUES:
            raise InputError(f"{what} has more than {MAX_FILTER_VALUES} values in all; give at most that many")
        texts: list[str] = []
        for v in values:
            if v is None or isinstance(v, (Mapping, list, tuple)):
                raise InputError(f"{what} {key!r}: values are strings (or numbers), not {type(v).__name__}")
            text = meta_value(v)
            _check_value(text, what, key)
            if text not in texts:
                texts.append(text)
        out[key] = tuple(texts)
    return out


def check_filters(raw: Mapping[str, Any] | None, *, known: Iterable[str], what: str = "filters") -> Filters:
    """The one check of a filter, for every way in (CLI ``--filter``, ``CRAG.ask(filters=)``, HTTP ``filters``).

    :func:`parse_filters` (its shape and size), then every key must be one of ``known`` (the
    metadata keys the knowledge base's documents carry) or a document field (``source``,
    ``title``, ``url``). Raises ``InputError`` naming the first unknown key and the known ones.

    >>> check_filters({"team": ["hr", "support"]}, known=["team"])
    {'team': ('hr', 'support')}
    """
    filters = parse_filters(raw, what=what)
    names = set(known) | set(CHUNK_FIELDS)
    for key in filters:
        if key not in names:
            listed = sorted(names)
            more = f" and {len(listed) - _LISTED_KEYS:,} more" if len(listed) > _LISTED_KEYS else ""
            raise InputError(
                f"{what} key {key!r} is not a field of any document; known keys: "
                f"{', '.join(listed[:_LISTED_KEYS])}{more}"
            )
    return filters


def describe(filters: Filters) -> str:
    """A filter as a reader writes it on the command line.

    >>> describe({"team": ("hr", "support"), "lang": ("zh",)})
    'team=hr|support, lang=zh'
    """
    return ", ".join(f"{k}={'|'.join(v)}" for k, v in filters.items())


def _check_value(value: str, what: str, key: str) -> None:
    if len(value) > MAX_VALUE_CHARS:
        raise InputError(f"{what} {key!r}: the value is {len(value):,} characters; the limit is {MAX_VALUE_CHARS:,}")
    if "\x00" in value:
        raise InputError(f"{what} {key!r}: the value contains a NUL byte; pass plain text")
