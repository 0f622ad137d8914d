"""Relevance graders (the article's "retrieval evaluator"): heuristic, trained, LLM judge, ensemble.

Each grader implements :class:`crag.protocols.Evaluator` and is registered by name
(``evaluator.backend``). Beside them: ``classify`` (query type and per-type thresholds),
``calibrate`` and ``metrics`` (AUROC, calibration error), ``train`` (fit the trained
grader), ``pairs`` (labelled pair files). Not to be confused with :mod:`crag.eval`, the
RAG-vs-CRAG harness; the decision rule itself is :func:`crag.decide.decide`.
"""
