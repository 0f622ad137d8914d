"""The forms a known secret is echoed in, as one matcher per set of secrets (used by :mod:`crag.redact`).

A provider that echoes the key it was sent rarely echoes it byte for byte. PHP's
``json_encode`` writes ``/`` as ``\\/``, other encoders write ``\\u002f``; a URL or a form body
writes ``%2F``; HTTP Basic sends ``base64("user:key")``; an HTML page writes ``&#47;``; a search
query is lowercased. Matching only the literal value let the part of a key after its first
escaped character through (a key without a digit then has no *shape* a pattern could catch:
it leaked whole). :class:`SecretForms` finds each known value

- in any case, each character as itself or escaped: JSON (``\\/``, ``\\uXXXX``, backslashes
  doubled by escaping twice), URL (``%XX`` of its UTF-8 bytes, ``+`` for a space) or HTML
  (``&#NN;``, ``&#xHH;``, ``&amp;`` and friends);
- inside base64 (standard or URL-safe alphabet, at any alignment, so ``user:key`` is found
  whatever the user name): the whole base64 run that holds it is the match.

>>> forms = SecretForms(["tvly-Ab/Cd9Ef"])
>>> forms.sub('{"detail": "bad key tvly-Ab\\\\/Cd9Ef"}', "***")
'{"detail": "bad key ***"}'
>>> forms.sub("auth=Basic dTp0dmx5LUFiL0NkOUVm ok, q=TVLY-AB%2fCD9EF", "***")
'auth=Basic *** ok, q=***'
"""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Sequence

__all__ = ["SecretForms", "forms_of"]

_HTML_NAMED = {"&": "amp", "<": "lt", ">": "gt", '"': "quot", "'": "apos", "/": "sol"}
_JSON_SHORT = {"\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t", '"': '"', "\\": "\\\\", "/": "/"}
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_\-]*={0,2}")
_MARKERS = ("\\", "%", "&", "+")  # a text without any of these holds no escaped form


def _char_forms(c: str) -> str:
    """A regex matching ``c`` as written or as any common escape of it (case-insensitive use)."""
    code = ord(c)
    alts = [re.escape(c)]
    if code <= 0xFFFF:  # JSON's \uXXXX (a character above the BMP is a surrogate pair: its own form below)
        alts.append(rf"\\+u{code:04x}")
    else:
        hi, lo = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        alts.append(rf"\\+u{hi:04x}\\+u{lo:04x}")
    if c in _JSON_SHORT:
        alts.append(r"\\+" + re.escape(_JSON_SHORT[c]))
    alts.append("".join(f"%{b:02x}" for b in c.encode("utf-8")))  # URL-encoded, one %XX per byte
    if c == " ":
        alts.append(r"\+")
    alts.append(rf"&#0*{code};|&#x0*{code:x};")  # an HTML character reference
    if c in _HTML_NAMED:
        alts.append(f"&{_HTML_NAMED[c]};")
    return "(?:" + "|".join(alts) + ")"


def _base64_cores(secret: str) -> list[str]:
    """The base64 characters that depend on ``secret``'s bytes alone, at each of the three
    alignments it can have inside an encoded text (``user:key`` puts it anywhere), in both alphabets."""
    raw = secret.encode("utf-8")
    cores: set[str] = set()
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + raw + b"\0\0").decode("ascii")
        start = -(-8 * pad // 6)  # the first character whose 6 bits all come from the secret
        end = 8 * (pad + len(raw)) // 6  # one past the last such character
        core = encoded[start:end]
        if len(core) >= 6:
            cores.add(core)
            cores.add(core.replace("+", "-").replace("/", "_"))
    return sorted(cores, key=len, reverse=True)


class SecretForms:
    """Every form of a set of known secrets (see the module docstring); build once, match often.

    ### Usage example
    >>> SecretForms(["plainletterskey"]).sub("x=PLAINLETTERSKEY", "***")
    'x=***'
    """

    def __init__(self, secrets: Sequence[str]) -> None:
        self.secrets = [s for s in secrets if s]  # longest first (the caller's order): a longer one wins
        self._lowered = [s.lower() for s in self.secrets]
        # One alternation for all secrets, longest first; each character as itself or escaped.
        body = "|".join("".join(_char_forms(c) for c in s) for s in self.secrets)
        self._escaped = re.compile(body, re.IGNORECASE) if body else None
        self._literal = re.compile("|".join(re.escape(s) for s in self.secrets), re.IGNORECASE) if body else None
        self._cores = [core for s in self.secrets for core in _base64_cores(s)]

    def sub(self, text: str, replacement: str) -> str:
        """``text`` with every form of every secret replaced by ``replacement``."""
        if not self.secrets or not text:
            return text
        lowered = text.lower()
        if any(s in lowered for s in self._lowered) and self._literal is not None:
            text = self._literal.sub(replacement, text)
        if self._escaped is not None and any(m in text for m in _MARKERS):
            text = self._escaped.sub(replacement, text)
        for core in self._cores:
            if core in text:
                text = _replace_runs(text, core, replacement)
        return text


def _replace_runs(text: str, core: str, replacement: str) -> str:
    """Replace each base64 run of ``text`` that contains ``core``."""
    out: list[str] = []
    pos = 0
    while (at := text.find(core, pos)) >= 0:
        start = at
        while start > pos and _BASE64_RUN.fullmatch(text[start - 1]):
            start -= 1
        match = _BASE64_RUN.match(text, at)
        end = match.end() if match else at + len(core)
        out += [text[pos:start], replacement]
        pos = end
    out.append(text[pos:])
    return "".join(out)


@functools.lru_cache(maxsize=32)
def forms_of(secrets: tuple[str, ...]) -> SecretForms:
    """The matcher of ``secrets`` (a tuple, longest first), built once per set."""
    return SecretForms(secrets)
