"""What a client of the server may choose: only what the operator's configuration enables.

A request may name a search provider (``POST /v1/ask {"search": "searxng"}``). Left open,
a client could make the server query a loopback SearXNG, spend a paid Tavily key or
index a corpus the operator never meant to serve. So a request may pick only a provider
in ``[search] client_choices`` (unset: the configured ``provider`` alone); ``none`` (no
external search) is always allowed, since it calls nothing. Anything else is refused with
HTTP 403 and one line, before any provider is built or called.

>>> from crag.config import CragSettings
>>> s = CragSettings(search={"provider": "none"})
>>> sorted(allowed_searches(s))
['none']
>>> check_search_choice(s, "searxng")  # doctest: +ELLIPSIS
Traceback (most recent call last):
crag.errors.ApiError: search provider 'searxng' is not enabled on this server (allowed: none); ...
"""

from __future__ import annotations

from crag.config import CragSettings
from crag.errors import ApiError

__all__ = ["allowed_searches", "check_search_choice"]


def allowed_searches(settings: CragSettings) -> set[str]:
    """The provider names a request may select."""
    chosen = settings.search.client_choices
    names = [settings.search.provider] if chosen is None else chosen
    return {n.strip() for n in names if n.strip()} | {"none"}


def check_search_choice(settings: CragSettings, search: str | None) -> None:
    """Raise ``ApiError(403)`` when a request picks a provider the configuration does not enable."""
    if search is None or not search.strip():  # the server's own default
        return
    allowed = allowed_searches(settings)
    if search.strip() not in allowed:
        raise ApiError(
            403,
            "search_not_allowed",
            f"search provider {search!r} is not enabled on this server (allowed: {', '.join(sorted(allowed))}); "
            "the operator enables providers with [search] client_choices",
        )
