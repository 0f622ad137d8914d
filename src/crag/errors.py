"""The one error tree of crag. Every error a user can meet is a ``CragError``.

::

    CragError
    ├── ConfigError                 bad or missing setting (names the setting)
    │   └── MissingAPIKeyError      a backend needs a secret from the environment
    ├── InputError                  bad user input (question, file, dataset line)
    │   ├── UnsupportedFileError    a file that cannot be ingested (skipped, with reason)
    │   └── NoMatchError            a metadata filter that no document of the knowledge base matches
    ├── KnowledgeBaseError          missing / empty / inconsistent knowledge base
    ├── BackendError                an external component failed (carries backend_id, step)
    │   ├── EmbedderError
    │   ├── LLMError
    │   │   ├── LLMUnavailableError endpoint unreachable or model cannot load
    │   │   ├── LLMReplyError       the model answered, but not in the asked form
    │   │   └── LLMBudgetExceeded   the LLM token budget is spent (also a BudgetExceeded)
    │   ├── SearchError
    │   │   └── SearchBudgetExceeded  the search budget is spent (also a BudgetExceeded)
    │   ├── StoreError
    │   ├── StateUnavailableError   the shared state database (kb.state_uri) cannot be reached
    │   └── BudgetExceeded          a per-request or per-day cost limit would be exceeded
    ├── DiskFullError               a write failed for lack of disk space (names the folder)
    ├── ModelIntegrityError         a bundled model failed its checksum
    ├── TraceNotFoundError          unknown trace id
    ├── DocumentNotFoundError       unknown document id
    ├── UnknownBackendError         unknown registry name (also a KeyError)
    ├── RequestCancelled            the caller stopped reading a streamed answer
    └── ApiError                    an HTTP request the server refuses (carries status, type)

Steps catch ``CragError`` (or a subtype) where a failure degrades the answer, never a
builtin such as ``ValueError``: a bad reply is an ``LLMReplyError``, so a real bug still
surfaces as one. Bad arguments to a function are plain ``ValueError`` and are not caught.

Messages are one line, name the input, and say what to do: the CLI prints them as they are.
Secrets are redacted from a message when the error is created (a provider's error body
may echo the key it was sent), so no later path can leak them.
"""

from __future__ import annotations

from crag.redact import redact_text


class CragError(Exception):
    """Root of every error raised by crag."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact_text(a) if isinstance(a, str) else a for a in args))


class ConfigError(CragError):
    """A setting is invalid or missing."""


class MissingAPIKeyError(ConfigError):
    """A backend needs a secret that is not set in the environment."""


class InputError(CragError, ValueError):
    """Input from the user is unusable (empty question, unreadable file, bad JSON line)."""


class UnsupportedFileError(InputError):
    """A file cannot be ingested; ingest skips it and reports this message."""


class NoMatchError(InputError):
    """A metadata filter no document matches: said instead of searching nothing and refusing.

    The CLI exits 2, the server answers 422.
    """


class KnowledgeBaseError(CragError):
    """The knowledge base is missing, empty, or cannot be opened."""

    @classmethod
    def missing(cls, path: object) -> KnowledgeBaseError:
        """No knowledge base at ``path``: the one line that says how to make one."""
        return cls(f"no knowledge base at {path}; create it with `crag ingest PATH --kb {path}`")


class BackendError(CragError):
    """An external component failed. ``backend_id`` and ``step`` say which and where."""

    def __init__(self, message: str, *, backend_id: str = "", step: str = "") -> None:
        super().__init__(message)
        self.backend_id = backend_id
        self.step = step


class EmbedderError(BackendError):
    """The embedder failed to load or to embed."""


class LLMError(BackendError):
    """The language model failed or returned something unusable."""


class LLMUnavailableError(LLMError):
    """The language model endpoint is unreachable, or the local model cannot load."""


class LLMReplyError(LLMError):
    """The model replied, but the reply is unusable (not the JSON asked for, nothing kept)."""


class SearchError(BackendError):
    """An external search provider failed (timeout, HTTP error, bad payload)."""


class StoreError(BackendError):
    """The vector store or keyword index failed."""


class StateUnavailableError(BackendError):
    """The state database of ``kb.state_uri`` (PostgreSQL) cannot be reached, or did not answer
    in time: the server answers 503 and ``/readyz`` fails until it is back."""


class BudgetExceeded(BackendError):
    """A per-request or per-day limit on LLM tokens or search calls would be exceeded."""


class SearchBudgetExceeded(BudgetExceeded, SearchError):
    """The search budget is spent: handled wherever a failed search already degrades."""


class LLMBudgetExceeded(BudgetExceeded, LLMError):
    """The LLM token budget is spent: handled wherever a failed LLM call already degrades."""


class DiskFullError(CragError):
    """A write failed because the disk (or the user's quota) is full; ``path`` is where.

    What was already stored is intact: the message says so and what to run once space is free.
    The CLI exits 2, the server answers 507 Insufficient Storage.
    """

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class ModelIntegrityError(CragError):
    """A model file did not match its expected checksum; it is refused."""


class TraceNotFoundError(CragError, KeyError):
    """No trace with the given id."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it a plain line
        return str(self.args[0]) if self.args else ""


class DocumentNotFoundError(CragError, KeyError):
    """No document with the given id in the knowledge base."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it a plain line
        return str(self.args[0]) if self.args else ""


class UnknownBackendError(CragError, KeyError):
    """No backend registered under the given name."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class RequestCancelled(CragError):
    """The caller stopped reading a streamed answer (closed it, or the client hung up).

    Raised inside the run at its next event, so the model stops between two tokens.
    """


class ApiError(CragError):
    """An HTTP request the server refuses: answered as ``{"error": {"type", "message"}}`` with ``status``.

    ### Usage example
    >>> e = ApiError(409, "invalid_trace", "trace abc has no question to replay")
    >>> e.status, e.type, str(e)
    (409, 'invalid_trace', 'trace abc has no question to replay')
    """

    def __init__(
        self, status: int, type_: str, message: str, *, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.type = type_
        self.param = param  # OpenAI's error fields, for the chat endpoint's clients
        self.code = code
