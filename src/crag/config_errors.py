"""One-line :class:`~crag.errors.ConfigError` for a setting that could not be read or validated.

A bad value names the setting and where it came from: a ``CRAG_*`` environment variable
wins over the TOML file, so when one sets the key (or its section, or a key inside it) the
error names the variable, not the file, which may not even mention the key.

>>> import os
>>> os.environ["CRAG_RETRIEVAL__TOP_K"] = "abc"
>>> env_names(("retrieval", "top_k"))
['CRAG_RETRIEVAL__TOP_K']
>>> del os.environ["CRAG_RETRIEVAL__TOP_K"]
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from crag.errors import ConfigError

__all__ = ["config_error", "env_names"]

_ENV_FIELD = re.compile(r'field "(\w+)" from source "EnvSettingsSource"')
JSON_HINT = "lists and tables take JSON, e.g. CRAG_SEARCH__ALLOW_DOMAINS='[\"example.com\"]'"


def config_error(exc: Exception, path: Path | None) -> ConfigError:
    """The one line for ``exc``, raised while reading settings from ``path`` and the environment."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        env = env_names(first["loc"])
        src = f" from the environment variable {env[0]}" if env else f" in {path}" if path else ""
        return ConfigError(f"invalid setting {where}{src}: {first['msg']}")
    field = _ENV_FIELD.search(str(exc))
    env = env_names((field[1],)) if field else []
    if env:  # pydantic-settings could not decode a list, table or section given as a variable
        return ConfigError(f"cannot parse the environment variable {env[0]} ({exc.__cause__ or exc}); {JSON_HINT}")
    return ConfigError(f"cannot read config {path}: {exc}" if path else f"cannot read settings: {exc}")


def env_names(loc: Sequence[int | str]) -> list[str]:
    """The set ``CRAG_*`` variables for the setting at ``loc``: the key, a section above it, or a key inside it."""
    key = "CRAG_" + "__".join(str(p) for p in loc).upper()
    return sorted(
        name
        for name in os.environ
        if (up := name.upper()) == key or key.startswith(up + "__") or up.startswith(key + "__")
    )
