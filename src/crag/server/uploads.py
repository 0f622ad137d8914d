"""Files sent to ``/v1/ingest``: documents named by the client, safe names, atomic writes.

Every upload names its document: the form's (or JSON body's) ``id``, else the file's name
(a JSON body without ``id``: a hash of its documents). A document's files live in a folder
of its own, ``uploads/<hash of id>/NAME``; a changed upload replaces the old version, whose
chunks leave search in the same commit that adds the new ones.

>>> safe_filename("../../etc/passwd"), safe_filename(".hidden notes?.md")
('passwd', 'hidden notes_.md')
>>> len(safe_filename("a" * 300 + ".md")), safe_filename("a" * 300 + ".md")[-4:]
(120, 'a.md')
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.requests import Request

from crag.atomic import write_atomic
from crag.errors import ApiError
from crag.ingest.load import SUPPORTED_SUFFIXES
from crag.jobs.store import JobFile
from crag.kb import DocName
from crag.metadata import parse_meta
from crag.server.body import parse_body
from crag.server.collections import Collection, Collections, collection_for
from crag.server.jobs import queue_ingest, queues_jobs
from crag.server.schemas import IngestRequest, RedactedJSONResponse
from crag.store.manifest_api import ManifestStore

__all__ = [
    "Upload",
    "check_id",
    "discard",
    "document_file",
    "ingest_summary",
    "jsonl_upload",
    "one_field",
    "read_uploads",
    "safe_filename",
]

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


FORM_FIELDS = ("collection", "meta", "clear_meta", "id")  # the text fields of a multipart upload beside its files
_ID = re.compile(r"\w[\w.\- ]{0,127}")  # a document id: it sits in a URL path, one segment
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off", "")


@dataclass(frozen=True)
class Upload:
    """One uploaded file, not yet written: its document id, its file name and its bytes."""

    id: str
    name: str
    data: bytes
    own_folder: bool = True  # False: named by its content, kept as uploads/NAME (JSON without an id)


def check_id(value: str, what: str = "id") -> str:
    """A client's document id, or a 400 naming what it may hold."""
    if not _ID.fullmatch(value) or value != value.strip():
        raise ApiError(
            400,
            "invalid_input",
            f"{what} {value[:40]!r} is not a document id: 1 to 128 letters, digits, _ . - or spaces, "
            "starting with a letter or digit",
        )
    return value


def document_file(uploads: Path, doc_id: str, name: str) -> Path:
    """Where an upload of document ``doc_id`` is kept: one folder per document (``uploads/<hash of
    id>/NAME``), so a new version lands beside (or on) the old one and the same bytes again on
    the same path (ingest says "unchanged")."""
    return uploads / hashlib.sha256(doc_id.encode("utf-8")).hexdigest()[:16] / name


async def read_uploads(
    request: Request, check: Callable[[dict[str, list[str]]], None]
) -> tuple[list[Upload], dict[str, list[str]]]:
    """The uploaded files of a multipart form and its text fields; nothing is written.

    ``check(fields)`` refuses the form (an unknown collection, a key that may not write, bad
    metadata) before any file is read. A file's document is the form's ``id`` (one file only)
    or its file name.
    """
    form = await request.form(max_files=100, max_fields=100)
    try:
        fields: dict[str, list[str]] = {}
        for name, value in form.multi_items():
            if isinstance(value, str):
                if name not in FORM_FIELDS:
                    raise ApiError(
                        400,
                        "invalid_input",
                        f"unknown form field {name!r}; send files, collection, id, meta=KEY=VALUE and clear_meta",
                    )
                fields.setdefault(name, []).append(value)
        files = [v for _, v in form.multi_items() if isinstance(v, UploadFile)]
        if not files:
            raise ApiError(400, "invalid_input", "multipart upload has no file; send files in form fields")
        given = one_field(fields, "id")
        if given is not None and len(files) > 1:
            raise ApiError(400, "invalid_input", f"id names one document, but {len(files)} files were sent; send one")
        check(fields)
        uploads = []
        for f in files:
            name = safe_filename(f.filename)
            if Path(name).suffix.lower() not in SUPPORTED_SUFFIXES:
                kinds = " ".join(sorted(SUPPORTED_SUFFIXES))
                raise ApiError(415, "unsupported_file", f"cannot ingest {name!r}; supported file types: {kinds}")
            doc_id = check_id(given) if given is not None else name
            uploads.append(Upload(doc_id, name, await f.read()))
        return uploads, fields
    finally:
        await form.close()


def one_field(fields: dict[str, list[str]], name: str) -> str | None:
    """The one value of a form field (None when absent); 400 when it is given twice."""
    values = fields.get(name) or []
    if len(values) > 1:
        raise ApiError(400, "invalid_input", f"form field {name!r} is given {len(values)} times; give it once")
    return values[0] if values else None


def flag_field(fields: dict[str, list[str]], name: str) -> bool:
    """A yes/no form field (``true``/``false``, ``1``/``0``...); absent is no."""
    value = (one_field(fields, name) or "").strip().lower()
    if value not in _TRUE + _FALSE:
        raise ApiError(400, "invalid_input", f"form field {name!r} is {value[:20]!r}; send true or false")
    return value in _TRUE


def jsonl_upload(req: IngestRequest) -> Upload:
    """The documents of a JSON ingest as one JSONL upload.

    With an ``id`` it is that document, replaced by the next request with the same ``id``.
    Without one it is named by a hash of the set of documents, so a client that retries
    (after a timeout, or a connection error after the server committed) writes the same file
    again and ingest says "unchanged": never a second copy. The same documents in another
    order land on the same name and replace it (no duplicates either).
    """
    rows = (json.dumps(d.model_dump(exclude_none=True), ensure_ascii=False, sort_keys=True) for d in req.documents)
    lines = list(dict.fromkeys(rows))  # the same document twice in one request is one document
    data = ("\n".join(lines) + "\n").encode()
    if req.id is not None:
        doc_id = check_id(req.id)
        name = safe_filename(doc_id if doc_id.lower().endswith(".jsonl") else f"{doc_id}.jsonl")
        return Upload(doc_id, name, data)
    digest = hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()[:24]
    return Upload(f"api-{digest}", f"api-{digest}.jsonl", data, own_folder=False)


def store(uploads: Path, items: list[Upload]) -> dict[str, DocName]:
    """Write the uploads (atomically); return each file's document id and name by its path."""
    names: dict[str, DocName] = {}
    for u in items:
        path = write_atomic(document_file(uploads, u.id, u.name) if u.own_folder else uploads / u.name, u.data)
        names[str(path.resolve())] = DocName(u.id, u.name)
    return names


def tidy(names: dict[str, DocName], manifest: ManifestStore | None) -> None:
    """Delete the files of replaced versions: in each uploaded document's folder, the files the
    knowledge base no longer holds (an upload of ``report.pdf`` replaced ``report.md``)."""
    if manifest is None:
        return
    for kept, name in names.items():
        if Path(kept).name != name.name or Path(kept).parent.name == "uploads":
            continue  # named by its content: nothing to replace
        for other in Path(kept).parent.iterdir():
            if str(other.resolve()) != kept and other.is_file() and manifest.file_sha(str(other.resolve())) is None:
                with contextlib.suppress(OSError):
                    other.unlink()


def discard(uploads: Path, file: str) -> None:
    """Delete a removed document's uploaded file (and its folder, when empty); others are left."""
    path = Path(file)
    if not path.is_relative_to(uploads.resolve()):
        return  # a document ingested from the server's own files: they are not ours to delete
    with contextlib.suppress(OSError):
        path.unlink()
        path.parent.rmdir()


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
        "metadata_changed": report.metadata_changed,
        "files": [
            {
                "path": rel(f.path),
                "id": f.document,
                "status": f.status,
                "chunks": f.chunks,
                "metadata_changed": f.metadata_changed,
                "reason": private(f.reason),
            }
            for f in report.files
        ],
        "warnings": [private(w) for w in report.warnings],
    }


# -- the route ----------------------------------------------------------------------------


def install(app: FastAPI, collections: Collections) -> None:
    """Add ``POST /v1/ingest`` (multipart files, or JSON documents) to ``app``."""

    @app.post("/v1/ingest")
    async def ingest(request: Request) -> Any:
        meta: dict[str, Any] | None
        if request.headers.get("content-type", "").lower().startswith("multipart/form-data"):

            def check(fields: dict[str, list[str]]) -> None:
                parse_meta(fields.get("meta", []), option="meta")  # a bad field: 400 before any file is read
                flag_field(fields, "clear_meta")
                collection_for(request, collections, one_field(fields, "collection"), write=True)

            items, fields = await read_uploads(request, check)
            col = collection_for(request, collections, one_field(fields, "collection"), write=True)
            meta, clear = parse_meta(fields.get("meta", []), option="meta"), flag_field(fields, "clear_meta")
        else:
            req = await parse_body(request, IngestRequest)
            col = collection_for(request, collections, req.collection, write=True)
            meta, clear, items = req.metadata, req.clear_metadata, [jsonl_upload(req)]
        if meta and clear:
            raise ApiError(400, "invalid_input", "metadata and clear_metadata together: give new metadata or clear it")
        if queues_jobs(col):  # a shared state database: any worker takes the job (crag.server.jobs)
            files = [JobFile(u.id, u.name, u.own_folder, u.data) for u in items]
            job_id = await run_in_threadpool(queue_ingest, col, files, meta, clear)
            location = f"/v1/jobs/{job_id}?collection={quote(col.name)}"
            return RedactedJSONResponse(
                {"job": job_id, "status": "queued"}, status_code=202, headers={"Location": location}
            )
        uploads = col.path / "uploads"
        # One ingest at a time per knowledge base (its writer is not re-entrant); the files are
        # written under the same lock, so two versions of one document never cross.
        async with col.ingest_lock:
            report = await run_in_threadpool(_store_and_ingest, col, uploads, items, meta, clear)
        return ingest_summary(report, uploads)


def _store_and_ingest(
    col: Collection, uploads: Path, items: list[Upload], meta: dict[str, Any] | None, clear: bool
) -> Any:
    names = store(uploads, items)
    report = col.engine.ingest(list(names), metadata=meta, clear_metadata=clear, names=names)
    tidy(names, col.engine.knowledge_base().manifest)
    return report
