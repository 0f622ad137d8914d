"""crag: Corrective Retrieval-Augmented Generation.

>>> from crag import CRAG
>>> rag = CRAG.from_config(kb={"path": "kb"})      # doctest: +SKIP
>>> rag.ingest(["docs/"])                            # doctest: +SKIP
>>> rag.ask("What is CRAG?").answer                  # doctest: +SKIP
>>> from crag import Request
>>> rag.ask(Request.of("What is CRAG?", mode="rag"))  # doctest: +SKIP
"""

from typing import Any

from crag._version import __version__ as __version__
from crag.errors import CragError
from crag.types import Action, Answer, Citation, Strip

__all__ = ["CRAG", "Action", "Answer", "Citation", "CragError", "Request", "Strip"]


def __getattr__(name: str) -> Any:
    # Lazy: importing crag must not load Chroma, jieba or models.
    if name == "CRAG":
        from crag.engine import CRAG

        return CRAG
    if name == "Request":
        from crag.request import Request

        return Request
    raise AttributeError(name)
