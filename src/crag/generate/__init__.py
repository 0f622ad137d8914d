"""Answer generation from the corrected context, with numbered citations.

:func:`generate` takes the sources best-first, asks the model once (re-asks once when it
refuses although a source was graded relevant) and returns a :class:`Generation`;
:mod:`crag.generate.prompts` holds the bilingual prompts with fenced sources;
:mod:`crag.generate.refusal` tells a refusal from an answer.
"""

from crag.generate.answer import DEFAULT_MAX_SOURCES, Generation, Replace, generate
from crag.generate.citations import attach_citations, citations_for
from crag.generate.prompts import build_messages, tag
from crag.generate.refusal import NO_CONTEXT, is_refusal

__all__ = [
    "DEFAULT_MAX_SOURCES",
    "NO_CONTEXT",
    "Generation",
    "Replace",
    "attach_citations",
    "build_messages",
    "citations_for",
    "generate",
    "is_refusal",
    "tag",
]
