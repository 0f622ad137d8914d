"""Files sent to ``/v1/ingest``: safe names, content-addressed paths, atomic writes.

>>> safe_filename("../../etc/passwd"), safe_filename(".hidden notes?.md")
('passwd', 'hidden notes_.md')
>>> len(safe_filename("a" * 300 + ".md")), safe_filename("a" * 300 + ".md")[-4:]
(120, 'a.md')
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.requests import Request

from crag.atomic import write_atomic
from crag.errors import ApiError
from crag.ingest.load import SUPPORTED_SUFFIXES
from crag.metadata import parse_meta
from crag.server.body import parse_body
from crag.server.collections import Collection, Collections, authorize
from crag.server.schemas import IngestRequest

__all__ = ["ingest_summary", "one_field", "safe_filename", "save_uploads", "write_jsonl"]

_UNSAFE = re.compile(r"[^\w.\- ]+", re.UNICODE)
_MAX_NAME = 120


def safe_filename(name: str | None) -> str:
    """A plain file name from a client-supplied one: no folders, no leading dots, no controls."""
    base = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    base = _UNSAFE.sub("_", base).strip(" .")
    if len(base) > _MAX_NAME:  # cut the stem, not the suffix: "….md" cut to "…" would be refused
        stem, dot, suffix = base.rpartition(".")
        keep = f".{suffix}" if dot and stem and len(suffix) <= 10 else ""
        base = base[: _MAX_NAME - len(keep)].rstrip(" .") + keep
    return base or "upload.txt"


FORM_FIELDS = ("collection", "meta")  # the text fields of a multipart upload beside its files


async def save_uploads(
    request: Request, folder_for: Callable[[dict[str, list[str]]], Path]
) -> tuple[list[Path], dict[str, list[str]]]:
    """Save the uploaded files; return their paths and the form's text fields.

    ``folder_for(fields)`` gives the uploads folder for the form's ``collection`` and ``meta``
    fields, and raises (an unknown collection, a key that may not write) before any file is
    written.
    """
    form = await request.form(max_files=100, max_fields=100)
    try:
        fields: dict[str, list[str]] = {}
        for name, value in form.multi_items():
            if isinstance(value, str):
                if name not in FORM_FIELDS:
                    raise ApiError(
                        400, "invalid_input", f"unknown form field {name!r}; send files, collection and meta=KEY=VALUE"
                    )
                fields.setdefault(name, []).append(value)
        files = [v for _, v in form.multi_items() if isinstance(v, UploadFile)]
        if not files:
            raise ApiError(400, "invalid_input", "multipart upload has no file; send files in form fields")
        uploads = folder_for(fields)
        saved = []
        for f in files:
            name = safe_filename(f.filename)
            if Path(name).suffix.lower() not in SUPPORTED_SUFFIXES:
                kinds = " ".join(sorted(SUPPORTED_SUFFIXES))
                raise ApiError(415, "unsupported_file", f"cannot ingest {name!r}; supported file types: {kinds}")
            data = await f.read()
            # A folder per content: two clients uploading "notes.md" never overwrite each other,
            # and the same bytes uploaded again land on the same path (ingest says "unchanged").
            folder = uploads / hashlib.sha256(data).hexdigest()[:16]
            saved.append(await run_in_threadpool(write_atomic, folder / name, data))
        return saved, fields
    finally:
        await form.close()


def one_field(fields: dict[str, list[str]], name: str) -> str | None:
    """The one value of a form field (None when absent); 400 when it is given twice."""
    values = fields.get(name) or []
    if len(values) > 1:
        raise ApiError(400, "invalid_input", f"form field {name!r} is given {len(values)} times; give it once")
    return values[0] if values else None


def write_jsonl(uploads: Path, req: IngestRequest) -> Path:
    """The documents of a JSON ingest as one JSONL file named by their content.

    The name is a hash of the set of documents, so a client that retries (after a timeout,
    or a connection error after the server committed) writes the same file again and ingest
    says "unchanged": never a second copy. The same documents in another order land on the
    same name and replace it (no duplicates either).
    """
    rows = (json.dumps(d.model_dump(exclude_none=True), ensure_ascii=False, sort_keys=True) for d in req.documents)
    lines = list(dict.fromkeys(rows))  # the same document twice in one request is one document
    digest = hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()[:24]
    return write_atomic(uploads / f"api-{digest}.jsonl", ("\n".join(lines) + "\n").encode())


def ingest_summary(report: Any, uploads: Path) -> dict[str, Any]:
    def rel(p: str) -> str:
        # Client-facing paths are relative to the KB: no server layout leaks out.
        try:
            return str(Path(p).resolve().relative_to(uploads.resolve().parent))
        except ValueError:
            return Path(p).name

    roots = {str(uploads.resolve().parent), str(uploads.parent)}

    def private(text: str) -> str:
        # Reasons and warnings name the file by its server path ("/srv/kb/uploads/…: binary content").
        for root in roots:
            text = text.replace(root + os.sep, "")
        return text

    statuses = ("added", "updated", "unchanged", "removed", "skipped")
    return {
        **{s: report.count(s) for s in statuses},
        "chunks_written": report.chunks_written,
        "files": [
            {"path": rel(f.path), "status": f.status, "chunks": f.chunks, "reason": private(f.reason)}
            for f in report.files
        ],
        "warnings": [private(w) for w in report.warnings],
    }


# -- parsing and errors -------------------------------------------------------------------


def install(app: FastAPI, collections: Collections) -> None:
    """Add ``POST /v1/ingest`` (multipart files, or JSON documents) to ``app``."""

    @app.post("/v1/ingest")
    async def ingest(request: Request) -> dict[str, Any]:
        def writable(name: str | None) -> Collection:
            col = collections.resolve(name)
            authorize(request, col, write=True)
            return col

        if request.headers.get("content-type", "").lower().startswith("multipart/form-data"):

            def folder_for(fields: dict[str, list[str]]) -> Path:
                parse_meta(fields.get("meta", []), option="meta")  # a bad field: 400 before any file is written
                return writable(one_field(fields, "collection")).path / "uploads"

            paths, fields = await save_uploads(request, folder_for)
            col, meta = writable(one_field(fields, "collection")), parse_meta(fields.get("meta", []), option="meta")
        else:
            req = await parse_body(request, IngestRequest)
            col, meta = writable(req.collection), req.metadata or {}
            paths = [await run_in_threadpool(write_jsonl, col.path / "uploads", req)]
        async with col.ingest_lock:  # one ingest at a time per knowledge base: its writer is not re-entrant
            report = await run_in_threadpool(lambda: col.engine.ingest(paths, metadata=meta))
        return ingest_summary(report, col.path / "uploads")
