"""The embedded LLM: a GGUF model run in-process by llama-cpp-python.

Loading a model takes seconds and hundreds of MB, so loaded models live in a
process-wide cache keyed by ``(path, n_ctx, flash_attn)`` and are shared by every ``LlamaCppLLM``
that asks for them. A llama.cpp context is not thread-safe: each cached model carries a
lock that serialises calls on it.

``llama_cpp`` is imported only in :meth:`LlamaCppLLM.warm_up`, so registering this
backend never needs the optional dependency.

Prompts are tokenized here, not by llama-cpp-python's chat handler: the handler parses
special tokens in the whole formatted prompt, message text included, so a document
holding ``<|im_start|>system`` would open a system turn. :mod:`crag.llm.chat_prompt`
parses them only in the template's own text.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from crag.errors import LLMError, LLMUnavailableError
from crag.llm.chat_prompt import CHATML, prompt_with_head
from crag.llm.compute import COMPUTE
from crag.llm.llama_replies import BACKEND_ID, chunk_delta, completion_of
from crag.llm.logits import logsumexp, single_token_ids
from crag.llm.lookup import DRAFT_TOKENS, greedy_lookup
from crag.llm.models import BUNDLED_MODELS, resolve_gguf
from crag.llm.prefix_cache import PrefixStates, common_prefix, read_prompt
from crag.protocols import Completion, TokenStream, read_out
from crag.redact import clip
from crag.registry import BackendDeps, Registries

if TYPE_CHECKING:
    from crag.config import CragSettings

log = logging.getLogger(__name__)
_YES = ("yes", "Yes", "YES")
_NO = ("no", "No", "NO")


@dataclass
class _Loaded:
    """One loaded model, its call lock, and what ``yes_probability`` derives from it once."""

    llama: Any
    lock: threading.Lock = field(default_factory=threading.Lock)
    formatter: Any = None  # the model's chat template (llama-cpp-python's Jinja2ChatFormatter)
    stop: list[str] = field(default_factory=list)  # the template's end-of-turn text
    yes_ids: np.ndarray | None = None
    no_ids: np.ndarray | None = None
    choice_ids: dict[str, np.ndarray] = field(default_factory=dict)  # by choice, for choice_probabilities
    heads: PrefixStates = field(default_factory=PrefixStates)  # saved system-prompt states (crag.llm.prefix_cache)


_LOADED: dict[tuple[str, int, bool, str], _Loaded] = {}
_LOADED_LOCK = threading.Lock()
SESSION_CTX = 2048  # a session's context: a title, two sentences and a question fit many times over
_EXIT_WAIT_SECONDS = 30.0  # at exit, how long to wait for a running call before leaving its model open


@atexit.register
def _close_loaded() -> None:
    # Free models while llama_cpp still exists: left to the garbage collector at interpreter
    # shutdown, Llama.__del__ runs after its module is torn down and prints a traceback.
    # A call still running in another thread (a daemon worker whose reader left) would use
    # the freed context and crash the process: wait for it to end, or leave that model open.
    with _LOADED_LOCK:
        for loaded in _LOADED.values():
            if not loaded.lock.acquire(timeout=_EXIT_WAIT_SECONDS):
                log.debug("%s still busy at exit; not freeing it", BACKEND_ID)
                continue  # the running call's frame holds it, so it is not collected either
            try:
                loaded.llama.close()
            except Exception as exc:  # shutting down anyway: note it, never fail the exit
                log.debug("closing %s failed at exit: %s: %s", BACKEND_ID, type(exc).__name__, exc)
        _LOADED.clear()


class LlamaCppLLM:
    """A chat model running in this process from a GGUF file or a bundled model name.

    The constructor only stores settings; :meth:`warm_up` (or the first call) resolves
    the model, assembling a bundled one on first use, and loads it.

    ### Usage example
    >>> llm = LlamaCppLLM("qwen2.5-coder-0.5b", n_ctx=2048)
    >>> llm.model_id
    'qwen2.5-coder-0.5b'
    >>> reply = llm.complete([{"role": "user", "content": "Say hi."}], max_tokens=8)  # doctest: +SKIP
    >>> "".join(llm.stream([{"role": "user", "content": "Say hi."}], max_tokens=8))  # doctest: +SKIP
    'Hi!'
    >>> llm.yes_probability([{"role": "user", "content": "Is 2 even? Answer yes or no."}])  # doctest: +SKIP
    0.97...
    """

    def __init__(
        self,
        model: str,
        *,
        n_ctx: int = 4096,
        n_threads: int = 0,
        seed: int = 0,
        lookup_decoding: bool = True,
        flash_attn: bool = True,
        slot: str = "",
    ) -> None:
        if n_ctx < 1:
            raise ValueError("n_ctx must be >= 1")
        if n_threads < 0:
            raise ValueError("n_threads must be >= 0 (0 = all cores)")
        self.model = model
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.seed = seed
        self.lookup_decoding = lookup_decoding  # greedy replies guess from the prompt (crag.llm.lookup)
        self.draft_tokens = DRAFT_TOKENS  # tokens guessed per pass when lookup_decoding is on
        self.flash_attn = flash_attn  # llama.cpp's fused attention: faster prompts, slightly other sums
        self.slot = slot  # "" for the main context; another name is a context of its own (session())
        # A bundled name is its own id; a path is shown by file stem (no directories in traces).
        self.model_id = model if model in BUNDLED_MODELS else Path(model).stem
        self._loaded: _Loaded | None = None

    def __repr__(self) -> str:
        return f"LlamaCppLLM(model={self.model!r}, n_ctx={self.n_ctx}, n_threads={self.n_threads})"

    def warm_up(self) -> None:
        """Resolve and load the model (shared with instances using the same file, n_ctx, flash_attn).

        Raises ``ConfigError`` / ``ModelIntegrityError`` for a bad ``model`` setting and
        ``LLMUnavailableError`` when llama-cpp-python is missing or the file cannot load.
        """
        if self._loaded is not None:
            return
        path = resolve_gguf(self.model)
        # flash_attn is part of the key: it changes the logits slightly, so a caller that asks
        # for it off (as llama_cpp.server loads a model) must not get an instance with it on.
        key = (str(path.resolve()), self.n_ctx, self.flash_attn, self.slot)
        with _LOADED_LOCK:
            loaded = _LOADED.get(key)
            if loaded is None:
                start = time.monotonic()
                loaded = _Loaded(llama=self._load(path))
                _LOADED[key] = loaded
                # Once per process and model: `crag chat -v` shows that a conversation loads it once.
                log.info("loaded %s (n_ctx %d) in %.1f s", path.name, self.n_ctx, time.monotonic() - start)
        self._loaded = loaded

    def session(self) -> LlamaCppLLM:
        """The same model in a context of its own (its cache, ~30 MB; the weights are mapped once), for
        short calls between two tokens of a stream of this one (:mod:`crag.llm.compute`)."""
        return LlamaCppLLM(
            self.model,
            n_ctx=min(self.n_ctx, SESSION_CTX),
            n_threads=self.n_threads,
            seed=self.seed,
            lookup_decoding=False,
            flash_attn=self.flash_attn,
            slot="session",
        )

    def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        """Answer a chat; with ``json_schema`` the output is grammar-constrained JSON."""
        loaded = self._ready()
        if self._greedy(temperature, json_schema):
            return read_out(self._stream_greedy(loaded, messages, max_tokens))
        with loaded.lock:
            try:
                kwargs: dict[str, Any] = {}
                if json_schema is not None:
                    from llama_cpp.llama_grammar import LlamaGrammar

                    kwargs["grammar"] = LlamaGrammar.from_json_schema(json.dumps(json_schema), verbose=False)
                with COMPUTE:  # a sampled or JSON reply is one step: rare, and never beside a stream
                    out = self._create(loaded, messages, max_tokens, temperature, **kwargs)
            except Exception as exc:
                raise self._call_error(exc, "complete") from exc
        return completion_of(out, self.model_id)

    def stream(
        self, messages: Sequence[dict[str, str]], *, max_tokens: int = 512, temperature: float = 0.0
    ) -> TokenStream:
        """Yield the reply's text as the model writes it; return the whole :class:`Completion`.

        The model's lock is held while the generator runs: close it (``generate`` does, and
        so does a ``for`` loop that ends) to stop generating and free the model.
        """
        loaded = self._ready()
        if self._greedy(temperature, None):
            return (yield from self._stream_greedy(loaded, messages, max_tokens))
        pieces: list[str] = []
        with loaded.lock:
            deltas = self._sampled_deltas(loaded, messages, max_tokens, temperature)
            try:
                for delta in deltas:
                    pieces.append(delta)
                    yield delta
            finally:
                deltas.close()  # stops llama.cpp mid-reply when the caller stopped early
            # llama.cpp's stream carries no usage: the context holds prompt + reply tokens.
            completion_tokens = len(pieces)
            prompt_tokens = max(0, int(loaded.llama.n_tokens) - completion_tokens)
        return Completion(
            text="".join(pieces).strip(),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            model=self.model_id,
        )

    def yes_probability(self, messages: Sequence[dict[str, str]]) -> float:
        """P("yes") / (P("yes") + P("no")) for the first answer token of this chat.

        Sums the probabilities of the single tokens spelling yes/Yes/YES (with or without
        a leading space) and likewise for no, so the score does not depend on casing.
        The prompt should ask for a yes/no answer.
        """
        loaded = self._ready()
        logits = self._first_answer_logits(loaded, messages, "yes_probability")
        assert loaded.yes_ids is not None and loaded.no_ids is not None
        # log-sum-exp keeps this finite when both answers are very unlikely.
        ly = logsumexp(logits[loaded.yes_ids])
        ln = logsumexp(logits[loaded.no_ids])
        return float(1.0 / (1.0 + np.exp(np.clip(ln - ly, -700.0, 700.0))))

    def choice_probabilities(self, messages: Sequence[dict[str, str]], choices: Sequence[str]) -> list[float]:
        """The model's distribution over ``choices`` for its first answer token, summing to 1.

        Each choice must be one token (with or without a leading space), e.g. the digits
        "1".."5" of a rating: reading the distribution instead of sampling one digit gives
        a graded score even from a small model that would print the same digit every time.
        """
        loaded = self._ready()
        logits = self._first_answer_logits(loaded, messages, "choice_probabilities")
        for c in choices:  # a judge asks the same digits again and again: tokenise them once
            if c not in loaded.choice_ids:
                loaded.choice_ids[c] = single_token_ids(loaded.llama, [c])
        ids = [loaded.choice_ids[c] for c in choices]
        missing = [c for c, i in zip(choices, ids, strict=True) if not len(i)]
        if missing:
            raise LLMError(
                f"{BACKEND_ID}: {self.model_id} has no single token for {missing}; use one-token choices",
                backend_id=BACKEND_ID,
                step="choice_probabilities",
            )
        lp = np.array([logsumexp(logits[i]) for i in ids])
        p = np.exp(lp - lp.max())
        return [float(x) for x in p / p.sum()]

    def _first_answer_logits(self, loaded: _Loaded, messages: Sequence[dict[str, str]], step: str) -> np.ndarray:
        with loaded.lock:
            try:
                self._prepare_yes_no(loaded)
                llama = loaded.llama
                tokens = self._tokens(loaded, messages)
                if len(tokens) >= llama.n_ctx():
                    raise ValueError(f"Requested tokens ({len(tokens)}) exceed context window of {llama.n_ctx()}")
                return self._next_token_logits(llama, tokens)
            except Exception as exc:
                raise self._call_error(exc, step) from exc

    # -- internals ---------------------------------------------------------------------------

    @staticmethod
    def _greedy(temperature: float, json_schema: dict[str, Any] | None) -> bool:
        """Greedy and free-form: our own decoder (logits only where read; prompt lookup if enabled)."""
        return temperature == 0 and json_schema is None

    def _stream_greedy(self, loaded: _Loaded, messages: Sequence[dict[str, str]], max_tokens: int) -> TokenStream:
        """:meth:`stream` by :func:`crag.llm.lookup.greedy_lookup`: text as UTF-8 completes."""
        import codecs

        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pieces: list[str] = []
        written = 0
        with loaded.lock:
            llama = loaded.llama
            try:
                tokens = self._tokens(loaded, messages, keep_head=True)
                if len(tokens) >= llama.n_ctx():
                    raise ValueError(f"Requested tokens ({len(tokens)}) exceed context window of {llama.n_ctx()}")
                budget = min(max_tokens, llama.n_ctx() - len(tokens))
                for _ in read_prompt(llama, tokens):
                    yield ""  # still reading the prompt: the reader may stop here (TokenStream)
                decoding = greedy_lookup(llama, tokens, budget, self.draft_tokens if self.lookup_decoding else 0)
                try:
                    for token in decoding:
                        written += 1
                        piece = decoder.decode(llama.detokenize([token], special=False))
                        if piece:
                            pieces.append(piece)
                            yield piece
                finally:
                    decoding.close()
                if tail := decoder.decode(b"", final=True):
                    pieces.append(tail)
                    yield tail
            except LLMError:
                raise
            except Exception as exc:  # the model failed mid-reply (context full, decode error)
                raise self._call_error(exc, "stream") from exc
        return Completion(text="".join(pieces).strip(), prompt_tokens=len(tokens), completion_tokens=written,
                          model=self.model_id)  # fmt: skip

    def _create(
        self, loaded: _Loaded, messages: Sequence[dict[str, str]], max_tokens: int, temperature: float, **kw: Any
    ) -> Any:
        """A reply by llama-cpp-python's own sampler (under the model's lock): sampled, or JSON."""
        return loaded.llama.create_completion(
            prompt=self._tokens(loaded, messages, keep_head=True),
            max_tokens=max_tokens,
            temperature=temperature,
            seed=self.seed,
            stop=loaded.stop,
            **kw,
        )

    def _sampled_deltas(
        self, loaded: _Loaded, messages: Sequence[dict[str, str]], max_tokens: int, temperature: float
    ) -> Generator[str, None, None]:
        """The text of a sampled reply as it is written, "" left out (under the model's lock)."""
        try:
            chunks = iter(self._create(loaded, messages, max_tokens, temperature, stream=True))
        except Exception as exc:
            raise self._call_error(exc, "stream") from exc
        try:
            while True:
                try:
                    with COMPUTE:
                        chunk = next(chunks)
                except StopIteration:
                    return
                except Exception as exc:  # the model failed mid-reply (context full, decode error)
                    raise self._call_error(exc, "stream") from exc
                if delta := chunk_delta(chunk):
                    yield delta
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()  # stops llama.cpp mid-reply when the caller stopped early

    def _ready(self) -> _Loaded:
        self.warm_up()
        assert self._loaded is not None
        return self._loaded

    def _load(self, path: Path) -> Any:
        try:
            import llama_cpp
        except ImportError:
            raise LLMUnavailableError(
                f"{BACKEND_ID}: llama-cpp-python is not installed: run "
                'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install \'crag[local]\', or use llm.backend = "openai"',
                backend_id=BACKEND_ID,
                step="load",
            ) from None
        threads = self.n_threads or os.cpu_count() or 1
        try:
            return llama_cpp.Llama(
                model_path=str(path),
                n_ctx=self.n_ctx,
                n_threads=threads,
                n_threads_batch=threads,
                flash_attn=self.flash_attn,
                verbose=False,
            )
        except Exception as exc:
            detail = clip(" ".join(str(exc).split()), 200) or type(exc).__name__
            raise LLMUnavailableError(
                f"{BACKEND_ID}: cannot load {path.name} ({detail}); check that it is a valid GGUF "
                "model and that llm.n_ctx fits in memory",
                backend_id=BACKEND_ID,
                step="load",
            ) from None

    def _call_error(self, exc: Exception, step: str) -> LLMError:
        detail = clip(" ".join(str(exc).split()), 200) or type(exc).__name__
        if "exceed context window" in detail:
            return LLMError(
                f"{BACKEND_ID}: prompt too long for {self.model_id} ({detail}); raise llm.n_ctx "
                "or lower generation.max_context_chars",
                backend_id=BACKEND_ID,
                step=step,
            )
        return LLMError(f"{BACKEND_ID}: {self.model_id} failed: {detail}", backend_id=BACKEND_ID, step=step)

    @staticmethod
    def _tokens(loaded: _Loaded, messages: Sequence[dict[str, str]], *, keep_head: bool = False) -> list[int]:
        """The prompt's tokens in the model's chat format; message text never parses as control tokens.

        ``keep_head`` (a call that writes text, under the model's lock): the prompt's head is
        left in the model's cache from a saved state (:mod:`crag.llm.prefix_cache`) when the
        cache no longer holds it.
        """
        if loaded.formatter is None:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            llama = loaded.llama
            template = llama.metadata.get("tokenizer.chat_template") or CHATML
            eos, bos = llama.token_eos(), llama.token_bos()
            eos_text = llama.detokenize([eos], special=True).decode("utf-8", "replace") if eos >= 0 else ""
            loaded.formatter = Jinja2ChatFormatter(
                template=template,
                eos_token=eos_text,
                bos_token=llama.detokenize([bos], special=True).decode("utf-8", "replace") if bos >= 0 else "",
                add_generation_prompt=True,
            )
            loaded.stop = [eos_text] if eos_text else []
        tokens, head = prompt_with_head(loaded.llama, loaded.formatter, [dict(m) for m in messages])
        if keep_head and len(tokens) < loaded.llama.n_ctx():
            loaded.heads.prepare(loaded.llama, tokens, head)
        return tokens

    @staticmethod
    def _prepare_yes_no(loaded: _Loaded) -> None:
        """Find the yes/no token ids once per loaded model."""
        if loaded.yes_ids is not None:
            return
        llama = loaded.llama
        loaded.yes_ids = single_token_ids(llama, _YES)
        loaded.no_ids = single_token_ids(llama, _NO)
        if not len(loaded.yes_ids) or not len(loaded.no_ids):
            raise ValueError("the model vocabulary has no single token for yes/no")

    @staticmethod
    def _next_token_logits(llama: Any, tokens: list[int]) -> np.ndarray:
        """Evaluate ``tokens`` and return the logits of the token that would come next."""
        import llama_cpp

        # Reuse the KV cache for the prefix shared with the previous call (a grader asks
        # the same instructions for passage after passage), as Llama.generate does.
        common = min(common_prefix(llama, tokens), len(tokens) - 1)  # evaluate at least one token for logits
        llama.n_tokens = common
        with COMPUTE:
            llama.eval(tokens[common:])
            ptr = llama_cpp.llama_get_logits_ith(llama.ctx, -1)
            return np.ctypeslib.as_array(ptr, shape=(llama.n_vocab(),)).astype(np.float64)


def _make(settings: CragSettings, deps: BackendDeps) -> LlamaCppLLM:
    llm = settings.llm
    return LlamaCppLLM(
        llm.model,
        n_ctx=llm.n_ctx,
        n_threads=llm.n_threads,
        lookup_decoding=llm.lookup_decoding,
        flash_attn=llm.flash_attn,
    )


def register(registries: Registries) -> None:
    """Plugin entry point: the embedded ``llama-cpp`` LLM."""
    registries.llms.register("llama-cpp", _make)
