"""Request bodies: bounded, decoded, parsed and validated before any route sees them.

Hostile bodies get a 4xx naming what is wrong, never a 500: the size is capped by
:class:`crag.server.auth.BodyLimitMiddleware`, and the nesting depth is measured here
*before* ``json.loads`` runs, because the decoder recurses once per level and a
100,000-deep ``[[[[…`` raises ``RecursionError`` from deep inside the stdlib.

The routes parse bodies themselves (so errors keep the API's one error shape), which
leaves FastAPI's generated OpenAPI without request schemas; :func:`document_bodies`
adds them, so clients and property-based fuzzers (schemathesis) see the real contract.

>>> json_depth('{"a": [1, {"b": "[[[not nesting]]]"}]}')
3
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, TypeVar

import numpy as np
from fastapi import FastAPI
from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from crag.errors import ApiError

__all__ = ["MAX_JSON_DEPTH", "describe_errors", "document_bodies", "json_depth", "parse_body"]

M = TypeVar("M", bound=BaseModel)
MAX_JSON_DEPTH = 32  # our deepest legitimate body (chat content parts, metadata) nests ~6 levels
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_OPEN = np.frombuffer(b"[{", dtype=np.uint8)
_CLOSE = np.frombuffer(b"]}", dtype=np.uint8)


def json_depth(text: str) -> int:
    """The deepest bracket nesting of a JSON text, without parsing it (linear time, no recursion).

    Brackets inside strings do not count. Unbalanced text gives some number; the parser that
    runs afterwards reports it as invalid JSON.
    """
    stripped = _STRING.sub('""', text).encode("utf-8", "surrogatepass")
    raw = np.frombuffer(stripped, dtype=np.uint8)
    steps = np.isin(raw, _OPEN).astype(np.int32) - np.isin(raw, _CLOSE).astype(np.int32)
    if not steps.any():
        return 0
    return int(np.cumsum(steps).max())


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


async def parse_body(request: Request, model: type[M]) -> M:
    """Decode, bound, parse and validate a JSON body: 400 (bytes/JSON/depth) or 422 (shape)."""
    body = await request.body()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, "invalid_utf8", f"request body is not valid UTF-8 (byte {exc.start})") from None
    if not text.strip():
        raise ApiError(400, "invalid_json", "request body is empty; send a JSON object")
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise ApiError(400, "invalid_json", f"request body nests {depth:,} levels deep; the limit is {MAX_JSON_DEPTH}")
    try:
        data = json.loads(text, parse_constant=_no_constants)
        # Lone surrogate escapes ("\ud800") parse but cannot be stored or echoed back.
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(400, "invalid_utf8", "request body holds an unpaired surrogate escape") from None
    except ValueError as exc:
        raise ApiError(400, "invalid_json", f"request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ApiError(422, "validation_error", "request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ApiError(422, "validation_error", describe_errors(exc.errors())) from None


def describe_errors(errors: Iterable[Any]) -> str:
    """Pydantic errors as one line: ``question: Input should be a valid string; ...``.

    >>> describe_errors([{"type": "extra_forbidden", "loc": ("qestion",), "msg": "Extra inputs are not permitted"}])
    'qestion: unknown field; check its spelling or leave it out'
    """
    parts = []
    for e in list(errors)[:5]:
        loc = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body"
        msg = "unknown field; check its spelling or leave it out" if e.get("type") == "extra_forbidden" else None
        parts.append(f"{loc}: {msg or e.get('msg', 'invalid')}")
    return "; ".join(parts)


ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
            "required": ["type", "message"],
        }
    },
    "required": ["error"],
}


def document_bodies(app: FastAPI, bodies: dict[tuple[str, str], type[BaseModel]]) -> None:
    """Publish request schemas for routes that parse their own body, and the error responses.

    ``bodies`` maps ``(path, method)`` to the pydantic model the route validates with.
    """
    default = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        spec = default()
        schemas = spec.setdefault("components", {}).setdefault("schemas", {})
        schemas["Error"] = ERROR_SCHEMA
        for (path, method), model in bodies.items():
            op = spec["paths"][path][method]
            schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(schema.pop("$defs", {}))
            schemas[model.__name__] = schema
            ref = {"$ref": f"#/components/schemas/{model.__name__}"}
            op["requestBody"] = {"required": True, "content": {"application/json": {"schema": ref}}}
            for status, why in (("400", "Malformed body"), ("422", "Invalid body")):
                op.setdefault("responses", {})[status] = {
                    "description": why,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                }
        app.openapi_schema = spec
        return spec

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to customise the schema
