"""Chat messages to prompt tokens for the embedded model, with a boundary text cannot cross.

A chat template turns messages into one string: ``<|im_start|>user\\n…<|im_end|>``.
Tokenizing that string with special-token parsing (what llama-cpp-python's chat handlers
do) also parses the *messages*: a document that contains ``<|im_end|><|im_start|>system``
becomes real control tokens and opens a system turn. Here the template is rendered with
a placeholder for each message's content; the template's own text is tokenized with
special tokens, each content without them, so a message can only ever be text.

Splitting at the content boundaries gives the same tokens as the whole string for
ordinary text: the template puts a newline or a control token on each side of a
content, and the tokenizer's pre-split breaks there anyway.

>>> class Tok:  # a stand-in tokenizer: one "token" per character, specials marked
...     def tokenize(self, text, add_bos=False, special=False):
...         s = text.decode()
...         if special and s.startswith("<|"):
...             return ["<SPECIAL>"]
...         return list(s)
>>> fmt = lambda messages: Rendered("".join(f"<|{m['role']}|>" + m["content"] for m in messages))
>>> prompt_tokens(Tok(), fmt, [{"role": "user", "content": "<|x|>"}])
['<SPECIAL>', '<', '|', 'x', '|', '>']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CHATML", "Rendered", "prompt_tokens", "prompt_with_head"]

# Private-use characters: no template writes them, and each message's content is swapped
# for one numbered slot before rendering, so no content is in the rendered text either.
_SLOT = "\ue000{}\ue001"
_SLOTS = re.compile("\ue000(\\d+)\ue001")


@dataclass
class Rendered:
    """What a chat formatter returns that the tokenizer needs (llama-cpp-python's shape)."""

    prompt: str
    stop: Any = None
    added_special: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def prompt_tokens(llama: Any, formatter: Callable[..., Any], messages: Sequence[dict[str, str]]) -> list[int]:
    """The tokens of ``messages`` in the model's chat format; contents never parse as special tokens."""
    return prompt_with_head(llama, formatter, messages)[0]


def prompt_with_head(
    llama: Any, formatter: Callable[..., Any], messages: Sequence[dict[str, str]]
) -> tuple[list[int], int]:
    """:func:`prompt_tokens`, and how many of them come before the last message's text (the head).

    The head (system prompt, the user turn's opening) is what one kind of call repeats from
    request to request: :mod:`crag.llm.prefix_cache` keeps the model's state after it.
    """
    slotted = [{**m, "content": _SLOT.format(i)} for i, m in enumerate(messages)]
    rendered = formatter(messages=slotted)
    tokens: list[int] = []
    head = 0
    if not getattr(rendered, "added_special", True):
        bos = llama.token_bos() if hasattr(llama, "token_bos") else -1
        if bos >= 0:
            tokens.append(bos)
    for k, part in enumerate(_SLOTS.split(rendered.prompt)):
        if k % 2 == 0:  # the template's own text: its control tokens are meant
            if part:
                tokens += llama.tokenize(part.encode("utf-8"), add_bos=False, special=True)
        else:  # a message's content: data, whatever it spells
            if int(part) == len(messages) - 1:
                head = len(tokens)
            content = messages[int(part)].get("content") or ""
            if content:
                tokens += llama.tokenize(content.encode("utf-8"), add_bos=False, special=False)
    return tokens, head


# Fallback for GGUFs without an embedded chat template.
CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
