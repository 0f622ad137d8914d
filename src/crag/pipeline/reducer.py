"""One reducer from a run's events to the text a client shows: the CLI, SSE, the OpenAI chat, LangChain.

The pipeline sends only verified text as ``token`` events (the sentence gate,
:mod:`crag.generate.gate`), refusals and abstentions included once they are final, so the
answer a client shows is the ``token`` deltas joined, and it equals the saved answer.
:class:`AnswerText` does the rest in one place: each delta is a whole sentence (the gate
splits only at whitespace), so it is redacted whole and shown at once, never held back a
word; the final ``answer`` event completes whatever the stream did not carry.

>>> from crag.types import Action, Answer
>>> text = AnswerText()
>>> [text.take(TokenEvent(piece)) for piece in ("It opened in 1901[1].", " It has a café[2].")]
['It opened in 1901[1].', ' It has a café[2].']
>>> answer = Answer("When?", "It opened in 1901[1]. It has a café[2].", Action.CORRECT, 0.9, [], [], "t1", {})
>>> text.take(AnswerEvent(answer)), text.shown == answer.answer
('', True)
"""

from __future__ import annotations

from crag.pipeline.events import AnswerEvent, Event, ReplaceEvent, TokenEvent
from crag.redact import redact_text
from crag.types import Answer

__all__ = ["AnswerText"]


class AnswerText:
    """The answer's text as it streams, redacted; :meth:`take` returns what to show for each event.

    ``shown`` is everything returned so far; ``answer`` the final :class:`~crag.types.Answer`
    once its event has come. ``replaced`` is True after a ``replace`` event (an escalation
    swapped a verified answer for a better one): a client that can redraw starts again from
    the text that follows; one that cannot goes on appending.
    """

    def __init__(self) -> None:
        self.shown = ""
        self.answer: Answer | None = None
        self.replaced = False

    def take(self, event: Event) -> str:
        """The text to show for ``event`` ("" for events that add none)."""
        piece = ""
        if isinstance(event, TokenEvent):
            piece = redact_text(event.value)
        elif isinstance(event, ReplaceEvent):
            self.replaced = True
            self.shown = ""
            return ""
        if isinstance(event, AnswerEvent):
            self.answer = event.value
            final = redact_text(self.answer.answer) if self.answer is not None else ""
            so_far = self.shown + piece
            if final.startswith(so_far):  # what the stream did not carry (an answer without tokens)
                piece += final[len(so_far) :]
        self.shown += piece
        return piece
