"""The one redaction point: every outward path passes text through :func:`redact`.

HTTP JSON and SSE bodies, CLI output (plain and ``--json``, stdout and stderr), log
records, saved traces and OpenTelemetry spans all call this module, and so does every
``CragError`` when it is created. It removes two kinds of secret:

- **known values**: environment variables whose name says they hold a secret (``*KEY*``,
  ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*CREDENTIAL*``, ``*AUTH*``), the variables a
  configuration names (``llm.api_key_env = "DEEPSEEK"``, see :func:`register_env`), and
  values handed over at run time (:func:`register`, e.g. ``create_app(api_keys=[...])``),
  and credentials written into a configured URL (:func:`url_secrets`). Comma-separated lists
  such as ``CRAG_API_KEYS=k1,k2`` count key by key. A known value is found in any case (a
  question's key lowercased into a search query) and in the forms providers echo it in:
  JSON-escaped (``\\/``, ``\\u002f``), URL-encoded, HTML character references, and inside
  base64 (``user:key`` of HTTP Basic) — see :mod:`crag.secret_forms`. Known values go first,
  before any pattern, whatever characters they hold.
- **common key shapes**, so a key this process never saw (a provider echoing another
  key, a key pasted into a document) is caught as well: ``sk-…``, ``tvly-…``,
  ``Bearer …``, ``ghp_…``, ``AKIA…``, ``AIza…``, ``xox?-…``, ``hf_…``, ``user:pass@`` in
  URLs, and ``api_key=…`` / ``"token": "…"`` style assignments.

It imports nothing from crag but :mod:`crag.secret_forms`, so the error tree and the tracer can both use it.

### Usage example
>>> import os
>>> os.environ["DEMO_API_KEY"] = "canary-4242"
>>> redact_text("provider said: bad key canary-4242")
'provider said: bad key ***'
>>> redact({"degradations": ["Authorization: Bearer abcdef123456789"]})
{'degradations': ['Authorization: ***']}
>>> del os.environ["DEMO_API_KEY"]
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import threading
from collections.abc import Iterable
from typing import Any

from crag.secret_forms import forms_of

__all__ = [
    "MIN_SECRET_LEN",
    "REDACTED",
    "StreamRedactor",
    "clip",
    "install_log_redaction",
    "known_secrets",
    "redact",
    "redact_record",
    "redact_text",
    "register",
    "register_env",
    "url_secrets",
]

REDACTED = "***"
MIN_SECRET_LEN = 6  # shorter values ("1", "true") would shred ordinary text
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)

# Shapes of keys and of places keys are written. Each pattern's first group (when it has
# one) is kept, so "api_key=abc123..." becomes "api_key=***" and the reader still sees what
# was removed.
_PATTERNS: list[re.Pattern[str]] = [
    re.compile(r"(?<![A-Za-z0-9])sk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_\-]{16,}"),  # OpenAI, Anthropic, Stripe
    re.compile(r"(?<![A-Za-z0-9])tvly-(?:dev-|prod-)?[A-Za-z0-9_\-]{12,}"),  # Tavily
    re.compile(r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{30,}"),  # GitHub
    re.compile(r"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{30,}"),
    re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}"),  # Hugging Face
    re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"),  # AWS access key id
    re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{35}"),  # Google API key
    re.compile(r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9\-]{10,}"),  # Slack
    re.compile(r"(?i)(\b(?:authorization|proxy-authorization)\s*[:=]\s*\"?)[^\s\",}]+(?:\s+[^\s\",}]+)?"),
    # A digit is required so English ("bearer instruments") survives; real keys have digits.
    re.compile(r"(?i)(\bbearer\s+)(?=[A-Za-z._~+/=\-]*[0-9])[A-Za-z0-9._~+/=\-]{8,}"),
    re.compile(r"(://[^/\s:@]+:)[^@\s/]+(?=@)"),  # https://user:password@host
    re.compile(
        r"(?i)(\b[\w\-]*(?:api[_\-]?key|apikey|access[_\-]?(?:token|key)|auth[_\-]?token|secret|password|passwd"
        r"|subscription[_\-]token|x-api-key|client[_\-]secret)[\w\-]*[\"']?\s*[:=]\s*[\"']?)"
        # Not an already redacted value, nor an environment variable's name (tavily_api_key_env=TAVILY_API_KEY).
        r"(?!\*\*\*)(?![A-Z][A-Z0-9]*_[A-Z0-9_]*(?![\w\-]))[^\s\"'&,;}]{4,}"
    ),
    re.compile(r"(?i)([?&](?:key|token|auth|sig|signature)=)[^&\s\"']{6,}"),
]

_registered: set[str] = set()
_registered_env: set[str] = set()
_lock = threading.Lock()


def register(values: Iterable[str]) -> None:
    """Treat ``values`` as secrets from now on (keys that do not come from the environment)."""
    with _lock:
        _registered.update(v for v in values if isinstance(v, str) and len(v.strip()) >= MIN_SECRET_LEN)


def url_secrets(url: str) -> list[str]:
    """The credentials written into a URL: its password (or a user name that stands alone, a
    token: ``https://TOKEN@host``) and the values of query parameters named like secrets.

    Register them (:func:`register`) for every URL a setting holds: errors and traces name
    the URL, and a token alone before ``@`` has no shape a pattern could tell from a user name.

    >>> url_secrets("https://tok3n-abc@host/v1?access_key=k-123456&q=x")
    ['tok3n-abc', 'k-123456']
    >>> url_secrets("http://127.0.0.1:8080/v1")
    []
    """
    from urllib.parse import parse_qsl, unquote, urlsplit

    try:
        parts = urlsplit(url.strip())
        user, password = parts.username, parts.password
    except ValueError:  # not a URL (a bad port, an unclosed bracket): nothing to take from it
        return []
    found = [password or user or ""]
    found += [v for k, v in parse_qsl(parts.query) if SECRET_NAME.search(k) or k.lower() in ("sig", "signature")]
    out: list[str] = []
    for value in found:
        for form in (value, unquote(value)):  # as written in the URL, and as sent
            if len(form) >= MIN_SECRET_LEN and form not in out:
                out.append(form)
    return out


def register_env(*names: str) -> None:
    """Treat the values of these environment variables as secrets, whatever their names.

    Settings such as ``llm.api_key_env`` may name a variable without KEY in it.
    """
    with _lock:
        _registered_env.update(n for n in names if n)


def known_secrets(environ: dict[str, str] | None = None) -> list[str]:
    """Every secret value currently known, longest first (so a longer one wins over its part)."""
    env = os.environ if environ is None else environ
    with _lock:
        values = set(_registered)
        names = set(_registered_env)
    raw = [v for k, v in env.items() if k in names or SECRET_NAME.search(k)]
    for v in raw:
        v = v.strip()
        values.add(v)
        # CRAG_API_KEYS=k1,k2: one key may be quoted alone.
        if "," in v:
            values.update(p.strip() for p in v.split(","))
    return sorted((v for v in values if len(v) >= MIN_SECRET_LEN), key=len, reverse=True)


def redact_text(text: str, secrets: Iterable[str] | None = None) -> str:
    """``text`` with known secrets and key-shaped strings replaced by ``***``."""
    if not isinstance(text, str) or not text:
        return text
    # Known values first, in every form they are echoed in (any case, JSON/URL/HTML escapes,
    # base64): a pattern rule run before could cut a key at an escape and leave its tail.
    text = forms_of(tuple(known_secrets() if secrets is None else secrets)).sub(text, REDACTED)
    for pattern in _PATTERNS:
        text = pattern.sub(_keep_prefix, text)
    return text


def clip(text: object, limit: int, secrets: Iterable[str] | None = None) -> str:
    """``text`` redacted *then* cut to ``limit`` characters, the order that never leaves part of a secret.

    Cutting first would keep the head of a key that straddles the cut, and the head no longer
    matches the key. Only a window of the text is redacted (a provider's error body may be
    megabytes): ``2 * limit + 1024`` characters, so whatever the redactions remove, a key cut
    at the window's end still lies beyond ``limit`` (every redaction at most halves what it
    replaces, and keys are shorter than 512 characters).

    >>> clip("x" * 190 + " canary-0123456789 tail", 200, secrets=["canary-0123456789"])[-10:]
    'x *** tail'
    """
    raw = text if isinstance(text, str) else str(text)
    return redact_text(raw[: 2 * limit + 1024], secrets)[:limit]


class StreamRedactor:
    """Redacts text that arrives in pieces (an answer streamed token by token).

    A secret split across two pieces would pass a check of each piece, so the word being
    written is held back until the next one starts, and so are the words before it while
    they could open a pattern that spans words (``Bearer <key>``, ``api_key = <key>``,
    ``Authorization: Basic <key>``). Secrets and key shapes hold no whitespace and no CJK
    character, so the released text is judged whole. The cost is one word of delay.

    ### Usage example
    >>> r = StreamRedactor(secrets=["canary-4242"])
    >>> [r.push(p) for p in ("my key is cana", "ry-", "4242 and ", "more")]
    ['my ', '', 'key is *** ', 'and ']
    >>> r.push(" Bearer abc123"), r.push("def456 ok"), r.flush()
    ('more ', '', 'Bearer *** ok')
    """

    def __init__(self, secrets: Iterable[str] | None = None) -> None:
        self._secrets = None if secrets is None else list(secrets)
        self._pending = ""

    def push(self, piece: str) -> str:
        """Take the next piece; return the redacted text that is now safe to release ("" if none)."""
        self._pending += piece
        cut = _safe_end(self._pending)
        if cut <= 0:
            return ""
        out, self._pending = self._pending[:cut], self._pending[cut:]
        return redact_text(out, self._secrets)

    def flush(self) -> str:
        """The rest, redacted (the text has ended)."""
        out, self._pending = self._pending, ""
        return redact_text(out, self._secrets)

    def reset(self) -> None:
        """Forget held text (it was replaced: the client discards it)."""
        self._pending = ""


# Word starts: after whitespace, and at each CJK character (Chinese has no spaces).
_WORD_START = re.compile(r"(?<=\s)\S|[\u3000-\u9fff\uff00-\uffef]")
# A word after which a secret may follow in the next word or two.
_OPENER = re.compile(
    r"(?i)(?:bearer|basic|authorization|key|token|secret|password|passwd|credential|auth)\W*\s*$|[:=]\W*\s*$"
)


def _safe_end(text: str) -> int:
    """Where the text that can be judged on its own ends (0: nothing yet)."""
    bounds = [0, *(m.start() for m in _WORD_START.finditer(text))]
    words = [text[a:b] for a, b in itertools.pairwise(bounds)]  # all but the last
    i = len(bounds) - 1  # the last word may still grow: held
    while i > 0 and (_OPENER.search(words[i - 1]) or (i > 1 and _OPENER.search(words[i - 2]))):
        i -= 1
    return bounds[i]


def _keep_prefix(match: re.Match[str]) -> str:
    return (match.group(1) if match.re.groups else "") + REDACTED


def redact(obj: Any, secrets: Iterable[str] | None = None) -> Any:
    """A copy of ``obj`` with every string (dict keys too) passed through :func:`redact_text`.

    Walks dicts, lists and tuples; other values pass through unchanged.
    """
    if secrets is None:
        found = known_secrets()
    else:
        found = sorted({s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_LEN}, key=len, reverse=True)
    return _walk(obj, found)


def _walk(obj: Any, found: list[str]) -> Any:
    if isinstance(obj, str):
        return redact_text(obj, found)
    if isinstance(obj, dict):
        return {_walk(k, found): _walk(v, found) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_walk(v, found) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_walk(v, found) for v in obj)
    return obj


# -- logs -----------------------------------------------------------------------------------
_factory_installed = False


def install_log_redaction() -> None:
    """Redact every log record of this process (ours, uvicorn's, httpx's) as it is created.

    A record factory, not a handler filter: crag does not own the handlers (uvicorn, the
    application embedding crag do), and a factory sees every record before any handler
    formats it. Tracebacks are rendered and redacted here, so an exception that quotes a
    key is logged without it. Idempotent.

    Every record stays formattable by any formatter: the arguments keep their shape
    (uvicorn's access formatter unpacks five of them), each redacted; see
    :func:`redact_record`.
    """
    global _factory_installed
    with _lock:
        if _factory_installed:
            return
        _factory_installed = True
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return redact_record(previous(*args, **kwargs))

    logging.setLogRecordFactory(factory)


def redact_record(record: logging.LogRecord) -> logging.LogRecord:
    """``record`` with secrets removed from its message, arguments and traceback, still formattable.

    Each argument is redacted where it stands, so formatters that read ``record.args``
    (uvicorn's access log) see no secret either. When a secret only shows once the
    message is put together ("Bearer %s" with the token as the argument), the message is
    formatted once and redacted whole; the arguments stay, consumed as empty text.

    >>> access = ("127.0.0.1", "GET", "/?api_key=s3cr3t-value", 200)
    >>> r = redact_record(logging.makeLogRecord({"msg": '%s - "%s %s" %d', "args": access}))
    >>> r.getMessage(), r.args[2]
    ('127.0.0.1 - "GET /?api_key=***" 200', '/?api_key=***')
    >>> spanning = {"msg": "Authorization: Bearer %s", "args": ("abc123def456",)}
    >>> redact_record(logging.makeLogRecord(spanning)).getMessage()
    'Authorization: ***'
    """
    secrets = known_secrets()  # read once for the whole record
    try:
        message = redact_text(record.getMessage(), secrets)
    except (TypeError, ValueError, KeyError) as exc:  # a broken format string: keep it readable, redacted
        note = f"{record.msg} {record.args!r} (log arguments do not fit: {type(exc).__name__})"
        record.msg, record.args = redact_text(note, secrets), None
        _redact_traceback(record, secrets)
        return record
    args = _redact_args(record.args, secrets)
    record.args = args
    if isinstance(record.msg, str):
        record.msg = redact_text(record.msg, secrets)
    try:
        same = record.getMessage() == message
    except (TypeError, ValueError, KeyError):  # redaction took a placeholder away
        same = False
    if not same:
        if args:  # formatted again by every formatter: escaped, each argument consumed as ""
            record.msg = message.replace("%", "%%") + ("%.0s" * len(args) if isinstance(args, tuple) else "")
        else:
            record.msg = message
    _redact_traceback(record, secrets)
    return record


def _redact_args(args: Any, secrets: list[str]) -> Any:
    if isinstance(args, tuple):
        return tuple(_redact_arg(a, secrets) for a in args)
    if isinstance(args, dict):
        return {k: _redact_arg(v, secrets) for k, v in args.items()}
    return args


def _redact_arg(arg: Any, secrets: list[str]) -> Any:
    if isinstance(arg, str):
        return redact_text(arg, secrets)
    if arg is None or isinstance(arg, (bool, int, float)):
        return arg
    shown = str(arg)
    clean = redact_text(shown, secrets)
    if clean != shown or redact_text(repr(arg), secrets) != repr(arg):
        return clean  # an object whose text holds a secret (a URL, an exception) goes as redacted text
    return arg


def _redact_traceback(record: logging.LogRecord, secrets: list[str]) -> None:
    if record.exc_info and record.exc_info[1] is not None:
        record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info), secrets)
    if record.stack_info:
        record.stack_info = redact_text(record.stack_info, secrets)
