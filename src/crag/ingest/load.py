"""Find and read source documents: text, Markdown, HTML, PDF, DOCX and JSONL.

Every failure a user can hit is an ``UnsupportedFileError`` with a one-line message that
names the file and says what to do; ingest skips the file and reports that line.

>>> from pathlib import Path
>>> from crag.ingest.load import discover, load_file
>>> files, skipped = discover(["docs/"])  # doctest: +SKIP
>>> docs, warnings = load_file(files[0])  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from crag.errors import UnsupportedFileError
from crag.ingest.chunk import normalize_whitespace, strip_controls
from crag.ingest.files import open_regular, regular_file_problem
from crag.ingest.formats import read_docx, read_pdf
from crag.ingest.limits import DEFAULT_LIMITS, InputLimits, check_markup
from crag.ingest.markdown import markdown_pieces, markdown_title, text_title
from crag.ingest.sections import Extracted, Outline, Piece, section_texts
from crag.metadata import normalize_metadata
from crag.text import scrub_surrogates, terminal_safe

__all__ = [
    "SUPPORTED_SUFFIXES",
    "Markdown",
    "SourceDoc",
    "decode_text",
    "discover",
    "load_file",
    "read_markdown",
    "split_markdown",
    "strip_controls",
]

SUPPORTED_SUFFIXES = {".txt", ".md", ".markdown", ".html", ".htm", ".pdf", ".docx", ".jsonl"}
_SUPPORTED = " ".join(sorted(SUPPORTED_SUFFIXES))

# Magic numbers of formats people commonly rename by mistake, to give a precise hint.
_MAGIC = {
    b"%PDF": "a PDF; rename it to .pdf",
    b"PK\x03\x04": "a ZIP/Office file; rename a Word document to .docx",
    b"\x89PNG": "a PNG image; images are not supported",
    b"\xff\xd8\xff": "a JPEG image; images are not supported",
    b"GIF8": "a GIF image; images are not supported",
}
_JSONL_FIELDS = {"text", "title", "url", "id", "metadata"}  # a JSONL record's own fields; the rest is metadata
_FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


@dataclass
class SourceDoc:
    """One document read from a file, before chunking.

    >>> doc = SourceDoc(source="/data/a.md", text="Hello.", title="A")
    >>> doc.url, doc.metadata
    ('', {})
    """

    source: str  # absolute path; for .jsonl "PATH#LINE" or "PATH#<id>"
    text: str
    title: str = ""
    url: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    section: str = ""  # the headings above this text ("Products > Yunque S5"), crag.ingest.sections


def discover(paths: Sequence[str | Path]) -> tuple[list[Path], list[tuple[str, str]]]:
    """Expand files and folders into supported regular files (folders recursively, sorted).

    Returns ``(files, skipped)``; ``skipped`` holds ``(path, reason)`` for missing paths,
    unsupported files, special files (FIFOs, sockets, devices, symlinks to them), symlink
    loops, symlinked folders (not followed) and hidden files a folder holds. Hidden folders
    (``.git``) are not entered; a hidden file named explicitly is honoured. Only ``stat`` is
    used: nothing is opened, so nothing here can block.
    """
    found = _Discovery()
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            found.walk(path)
        elif path.is_file() or os.path.lexists(path):  # a special file or a bad link: consider says why
            found.consider(path)
        else:
            found.skip(path, "not found; check the path")
    return found.files, found.skipped


@dataclass
class _Discovery:
    """What :func:`discover` has found so far: the files to read, the paths skipped and why."""

    files: list[Path] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    seen: set[Path] = field(default_factory=set)

    def skip(self, path: str | Path, reason: str) -> None:
        self.skipped.append((printable_path(path), reason))

    def consider(self, path: Path) -> None:
        """Keep ``path`` when it is a supported regular file not seen before, else say why not."""
        if not is_utf8_path(path):  # SQLite and every output need text; the name cannot become text
            self.skip(path, "file name is not valid UTF-8; rename the file")
            return
        if path.suffix.lower() not in SUPPORTED_SUFFIXES:
            kind = f"'{path.suffix}'" if path.suffix else "without a suffix"
            self.skip(path, f"unsupported file type {kind}; supported: {_SUPPORTED}")
            return
        problem = regular_file_problem(path)
        if problem is None:
            try:
                resolved = path.resolve()
            except (OSError, RuntimeError):  # a loop further up the path (RuntimeError before 3.13)
                problem = "symlink loop; fix or remove the link"
        if problem is not None:
            self.skip(path, problem)
            return
        if resolved not in self.seen:  # the same file named twice is ingested once
            self.seen.add(resolved)
            self.files.append(resolved)

    def unreadable(self, exc: OSError) -> None:
        where = exc.filename if exc.filename is not None else "folder"
        self.skip(where, f"cannot read folder: {exc.strerror}; check its permissions")

    def walk(self, folder: Path) -> None:
        """Consider the files under ``folder``, sorted, without entering hidden or linked folders."""
        # os.walk does not follow directory symlinks, so link loops cannot recurse forever;
        # a symlinked folder is listed as skipped rather than dropped without a word.
        for root, dirs, names in os.walk(folder, onerror=self.unreadable):
            for d in dirs:
                if not d.startswith(".") and os.path.islink(os.path.join(root, d)):
                    self.skip(Path(root) / d, _LINKED_FOLDER)
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(names):
                if not name.startswith("."):
                    self.consider(Path(root) / name)
                elif Path(name).suffix.lower() in SUPPORTED_SUFFIXES:  # ..txt, .notes.md: say so
                    self.skip(Path(root) / name, _HIDDEN)


_LINKED_FOLDER = "symlink to a folder, not followed; pass the folder itself to ingest it"
_HIDDEN = "hidden file (its name starts with '.'); pass it by name to ingest it"


def is_utf8_path(path: str | Path) -> bool:
    """False for names holding bytes that are not UTF-8 (Python keeps them as lone surrogates)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable_path(path: str | Path) -> str:
    r"""``path`` as text that can be printed and stored on one line.

    Undecodable bytes become U+FFFD; control characters and the separators Python splits
    lines on (\x1c to \x1e, \x85, U+2028/9) are shown escaped, so an error naming the file
    stays one line.

    >>> printable_path("a\x1eb\nc.txt")
    'a\\x1eb\\nc.txt'
    """
    return printable_text(os.fsencode(path).decode("utf-8", "replace"))


def printable_text(text: str) -> str:
    r"""``text`` with control characters, line separators and lone surrogates escaped (one line).

    >>> printable_text("0\x1e0")
    '0\\x1e0'
    """
    return terminal_safe(text, one_line=True)


def load_file(path: Path, limits: InputLimits = DEFAULT_LIMITS) -> tuple[list[SourceDoc], list[str]]:
    """Read one file into documents. Returns ``(docs, warnings)``.

    Raises ``UnsupportedFileError`` for an unsupported suffix, a special file (FIFO, device),
    an unreadable or binary file, a corrupt or encrypted PDF, a corrupt DOCX, a document that
    would expand beyond ``limits`` (:mod:`crag.ingest.limits`), no extractable text, or a
    JSONL file without a single valid line.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise UnsupportedFileError(f"{path}: unsupported file type '{suffix}'; supported: {_SUPPORTED}")
    try:
        with open_regular(path) as fh:  # a FIFO, a device or a symlink loop is refused before any read
            data = fh.read()
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise UnsupportedFileError(f"cannot read {path}: {why}; check it is a readable file") from None
    source = str(path.resolve())
    if not data.strip():
        raise UnsupportedFileError(f"{path}: file is empty; add text or remove it")
    if suffix == ".jsonl":
        return _load_jsonl(path, source, data)
    meta: dict[str, str] = {}
    url = ""
    if suffix == ".pdf":
        doc = read_pdf(path, limits)
    elif suffix == ".docx":
        doc = read_docx(path, limits)
    elif suffix in (".html", ".htm"):
        check_markup(path, data, limits)
        doc = _read_html(html_markup(path, data))
    elif suffix in (".md", ".markdown"):
        text, title, url, meta = read_markdown(decode_text(path, data))
        doc = Extracted(title, markdown_pieces(text, Outline(title)))
    else:
        title, text = text_title(decode_text(path, data))
        doc = Extracted(title, iter([Piece(text, 1.0)]))
    title = normalize_whitespace(strip_controls(doc.title)) or path.stem
    docs = [
        SourceDoc(source=source, text=text, title=title, url=url, metadata=meta, section=section)
        for section, text, _ in section_texts(doc.pieces)
    ]
    if not docs:
        hint = "scanned pages need OCR first" if suffix == ".pdf" else "add text or remove the file"
        raise UnsupportedFileError(f"{path}: no extractable text; {hint}")
    return docs, []


def _read_html(markup: str) -> Extracted:
    from crag.ingest.html_text import read_html  # bs4 is imported when a page is read, not with crag

    return read_html(markup)


def html_markup(path: Path, data: bytes) -> str:
    """An HTML file's bytes as text, in the charset its ``<meta>`` declares when UTF-8 fails."""
    meta = _META_CHARSET.search(data[:4096])
    return decode_text(path, data, meta.group(1).decode("ascii") if meta else "")


def decode_text(path: Path, data: bytes, declared: str = "") -> str:
    """Decode bytes as text without producing mojibake, or raise ``UnsupportedFileError``.

    The encoding is :func:`text_encoding`'s choice.
    """
    return _decode(path, data, declared)[1]


def text_encoding(path: Path, data: bytes, declared: str = "") -> str:
    """The codec ``data`` decodes with, without producing mojibake, or raise ``UnsupportedFileError``.

    Order: BOM / UTF-8, a declared charset (HTML), GB18030 when the result reads as common
    simplified Chinese, then charset_normalizer only when its answer is unambiguous.
    """
    return _decode(path, data, declared)[0]


def _decode(path: Path, data: bytes, declared: str) -> tuple[str, str]:
    """(codec, text): the choice :func:`text_encoding` documents, and the text it gives."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16 with BOM legitimately contains NUL bytes
        with contextlib.suppress(UnicodeDecodeError):
            return "utf-16", data.decode("utf-16")
    for magic, what in _MAGIC.items():
        if data.startswith(magic):
            raise UnsupportedFileError(f"{path}: binary content, looks like {what}")
    if b"\x00" in data:
        raise UnsupportedFileError(f"{path}: binary content (NUL bytes), not text; remove it or convert it")
    with contextlib.suppress(UnicodeDecodeError):
        return "utf-8-sig", data.decode("utf-8-sig")
    if declared:
        with contextlib.suppress(LookupError, UnicodeDecodeError):
            return declared, data.decode(declared)
    with contextlib.suppress(UnicodeDecodeError):
        text = data.decode("gb18030")
        if _looks_simplified_chinese(text):
            return "gb18030", text
    guess = _detect(data)
    if guess is None:
        raise UnsupportedFileError(f"{path}: not UTF-8 text and its encoding is unclear; re-save it as UTF-8")
    return guess


def _looks_simplified_chinese(text: str) -> bool:
    """True when most non-ASCII characters are GB2312 level-1 hanzi or CJK punctuation.

    GB18030 decodes many foreign byte streams (Big5, Latin-1) "successfully" into rare
    characters; real simplified Chinese text is almost entirely level-1 hanzi.
    """
    wide = [c for c in text if ord(c) > 0x7F]
    if not wide:
        return False
    common = 0
    for ch in wide:
        try:
            lead = ch.encode("gb2312")[0]
        except UnicodeEncodeError:
            continue
        if 0xB0 <= lead <= 0xD7 or 0xA1 <= lead <= 0xA3:
            common += 1
    return common >= 0.9 * len(wide)


def _detect(data: bytes) -> tuple[str, str] | None:
    """charset_normalizer's (encoding, text), or None when it is missing, messy or ambiguous."""
    try:
        from charset_normalizer import from_bytes
    except ImportError:  # optional: without it, only UTF-8 and GB18030 are accepted
        return None
    matches = list(from_bytes(data))
    if not matches or matches[0].chaos > 0.05:
        return None
    best = str(matches[0])
    # Equally plausible encodings that disagree on the text mean we would be guessing.
    if any(m.chaos - matches[0].chaos <= 0.1 and str(m) != best for m in matches[1:]):
        return None
    # Wrong decodings show up as controls, private-use or unassigned code points, U+FFFD and
    # halfwidth katakana (what Cyrillic/Latin bytes become when read as Shift-JIS).
    odd = sum(
        1
        for c in best
        if c not in "\t\n\r\f"
        and (unicodedata.category(c) in ("Cc", "Co", "Cn", "Cs") or "\uff61" <= c <= "\uff9f" or c == "\ufffd")
    )
    return (str(matches[0].encoding), best) if odd <= 0.005 * len(best) else None


class Markdown(NamedTuple):
    """A Markdown document split into its body and what its front matter says."""

    text: str
    title: str
    url: str
    metadata: dict[str, str]


def split_markdown(text: str) -> tuple[str, str]:
    """Markdown stays as is; title from front matter ``title:`` or the first ``# `` heading."""
    md = read_markdown(text)
    return md.text, md.title


def read_markdown(text: str) -> Markdown:
    r"""A Markdown document's body, title, url and metadata.

    YAML front matter (between ``---`` lines at the top) is removed from the text; its
    ``title`` and ``url`` are the document's, its other fields the document's metadata
    (values as strings, see :mod:`crag.metadata`). Front matter that is not a YAML mapping gives no metadata; its
    ``title:`` line still counts. Without a ``title`` the first top-level ``#`` (or ``=``
    underlined) heading is the title.

    >>> read_markdown("---\ntitle: 手册\nteam: 产品\nyear: 2024\n---\n# H\nBody")
    Markdown(text='# H\nBody', title='手册', url='', metadata={'team': '产品', 'year': '2024'})
    """
    title = url = ""
    meta: dict[str, str] = {}
    text = text.replace("\r\n", "\n")
    front = _FRONT_MATTER.match(text)
    if front:
        fields = _yaml_mapping(front.group(1))
        if fields is None:
            for line in front.group(1).splitlines():
                if line.lower().startswith("title:"):
                    title = line.split(":", 1)[1].strip().strip("\"'")
        else:
            title = str(fields.pop("title", "") or "").strip()
            url = str(fields.pop("url", "") or "").strip()
            meta = normalize_metadata(fields)
        text = text[front.end() :]
    return Markdown(text, title or markdown_title(text), url, meta)


def _yaml_mapping(block: str) -> dict[str, Any] | None:
    """Front matter as a mapping with string keys, or None when it is not one."""
    import yaml

    try:
        data = yaml.safe_load(block)
    except yaml.YAMLError:
        return None
    if not isinstance(data, dict):
        return None
    return {str(k): v for k, v in data.items()}


def _load_jsonl(path: Path, source: str, data: bytes) -> tuple[list[SourceDoc], list[str]]:
    """One document per line; bad lines are skipped with a warning naming the line number."""
    warns: list[str] = []
    docs = list(jsonl_docs(path, source, decode_text(path, data).split("\n"), warns))
    if not docs:
        raise no_valid_jsonl(path, warns)
    return docs, warns


def jsonl_docs(path: Path, source: str, lines: Iterable[str], warns: list[str]) -> Iterator[SourceDoc]:
    """The documents of JSONL ``lines`` in order; each bad line adds a warning to ``warns``.

    Lines end at ``\n`` only (a raw U+2028 inside a JSON string is text, not a line end), so
    a file read whole and a file read line by line give the same documents.
    """
    ids: set[str] = set()
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        problem, doc = _jsonl_doc(line.rstrip("\r"), f"{source}#{lineno}", source)
        key = doc.source[len(source) + 1 :] if doc is not None else ""  # the id (or line number) alone
        if doc is not None and key in ids:
            problem, doc = f"duplicate id {key!r}", None
        if doc is None:
            warns.append(f"{path} line {lineno}: {problem}; line skipped")
            continue
        ids.add(key)
        yield doc


def no_valid_jsonl(path: Path, warns: Sequence[str]) -> UnsupportedFileError:
    """The error for a JSONL file without a single usable line."""
    first = f" (first problem: {warns[0]})" if warns else ""
    return UnsupportedFileError(
        f'{path}: no valid JSONL line; each line needs a JSON object with a non-empty "text"{first}'
    )


def _jsonl_doc(line: str, default_source: str, source: str) -> tuple[str, SourceDoc | None]:
    """Parse one JSONL line into (problem, doc); exactly one of them is meaningful."""
    try:
        obj = scrub_surrogates(json.loads(line))
    except json.JSONDecodeError as exc:
        return f"invalid JSON ({exc.msg} at column {exc.colno})", None
    except RecursionError:  # the decoder recurses once per nesting level
        return "JSON nested too deeply", None
    if not isinstance(obj, dict):
        return "not a JSON object", None
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        return 'missing or empty "text" string', None
    for key in ("title", "url"):
        if key in obj and obj[key] is not None and not isinstance(obj[key], str):
            return f'"{key}" must be a string', None
    meta = obj.get("metadata") or {}
    if not isinstance(meta, dict):
        return '"metadata" must be a JSON object', None
    doc_id = obj.get("id")
    if doc_id is not None and (isinstance(doc_id, bool) or not isinstance(doc_id, (str, int))):
        return '"id" must be a string or integer', None
    text = normalize_whitespace(strip_controls(text))
    if not text:
        return '"text" has no visible characters', None
    has_id = doc_id is not None and str(doc_id).strip()
    return "", SourceDoc(
        source=f"{source}#{str(doc_id).strip()}" if has_id else default_source,
        text=text,
        title=(obj.get("title") or "").strip(),
        url=(obj.get("url") or "").strip(),
        # Fields beside text/title/url/id are metadata too; the "metadata" object wins a clash.
        metadata=normalize_metadata({k: v for k, v in obj.items() if k not in _JSONL_FIELDS})
        | normalize_metadata(meta),
    )
