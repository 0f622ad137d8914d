"""One model computes at a time in this process.

An answer streams from one llama.cpp context while the sentence gate asks a short yes/no
question of a second one (:meth:`crag.llm.llama_cpp.LlamaCppLLM.session`): same weights
(memory-mapped once), separate caches. Each context runs on every core, and llama.cpp's
threads spin while they wait, so two contexts evaluating at once each run at well under half
speed. Every evaluation takes this lock for one step (a prompt block, one decoded token, a
yes/no prompt): the answer's next token waits while the check runs, and the other way round.

>>> with COMPUTE:
...     pass
"""

from __future__ import annotations

import threading

__all__ = ["COMPUTE"]

COMPUTE = threading.RLock()  # re-entrant: a saved prompt head is evaluated inside a step that holds it
