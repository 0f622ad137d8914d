"""The ``[server]`` settings of :mod:`crag.config`: limits, collections and scoped API keys.

Kept beside :mod:`crag.config` (which re-exports them) so that file stays small.

>>> ServerSettings(collections={"handbook": "kb-handbook"}).default_collection
''
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from crag.collection_names import SINGLE_COLLECTION, check_collection_name
from crag.config_state import Shared

__all__ = ["ApiKeySettings", "Section", "ServerSettings"]


class Section(BaseModel):
    """A settings section; a misspelt key fails loudly instead of silently falling back to a default."""

    model_config = ConfigDict(extra="forbid")


class ApiKeySettings(Section):
    key_env: str = Field(
        description="Environment variable holding the key: keys are secrets and never appear in a settings file."
    )
    collections: list[str] = Field(["*"], min_length=1, description="Collections the key may use; '*' = every one.")
    access: Literal["read", "write"] = Field(
        "read",
        description="read: ask, chat, models, traces and feedback; write: also ingest documents.",
    )


class ServerSettings(Section):
    max_header_kb: int = Field(
        64, ge=1, le=1024, description="Most kilobytes of request line and headers; more is answered 431."
    )
    header_timeout: float = Field(
        10.0, gt=0, description="Seconds a client has to send a request's line and headers; then 408 and closed."
    )
    idle_timeout: float = Field(
        15.0, gt=0, description="Seconds a connection may idle between requests or mid-body; then it is closed."
    )
    shared: Shared = False
    collections: dict[str, Path] = Field(
        {},
        description="Knowledge bases one `crag serve` holds, name -> folder (also `crag serve --kb NAME=PATH`). "
        "Empty: kb.path alone, as the collection 'crag'. Each keeps its traces beside it.",
    )
    default_collection: str = Field(
        "",
        description="Collection of requests that name none; unset: the only collection, else requests must name one.",
    )
    keys: list[ApiKeySettings] = Field(
        [],
        description="Scoped API keys, e.g. [[server.keys]] key_env = 'CRAG_KEY_SUPPORT', collections = ['handbook'], "
        "access = 'read'. Keys in CRAG_API_KEYS may use every collection, with write access.",
    )

    @model_validator(mode="after")
    def _names(self) -> ServerSettings:
        for name in self.collections:
            check_collection_name(name)
        if self.default_collection and self.default_collection not in self.collections:
            raise ValueError(f"server.default_collection {self.default_collection!r} is not in server.collections")
        names = set(self.collections) or {SINGLE_COLLECTION}
        for i, key in enumerate(self.keys):
            unknown = [c for c in key.collections if c != "*" and c not in names]
            if unknown:
                raise ValueError(f"server.keys[{i}] names the unknown collection {unknown[0]!r}")
        return self
