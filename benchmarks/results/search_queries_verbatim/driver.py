"""How these runs were made: ``crag eval`` with the question as asked as the first search query.

    CRAG_CORRECTION__SEARCH_TIMEOUT=60 python benchmarks/results/search_queries_verbatim/driver.py \
        --dataset <one language of data/hard> --kb KB --search corpus \
        --search-corpus data/hard/external --modes crag --output OUT

Everything else is the default config of ``results/hard_240_trim/``. Not adopted (see
benchmarks/README.md, "Search queries").
"""

import sys

import crag.pipeline.correction as correction
from crag.correct import rewrite

keyword_queries = rewrite.keyword_queries


def verbatim_first(question: str, docs: list[str], *, max_queries: int = 2) -> list[str]:
    rest = [q for q in keyword_queries(question, docs, max_queries=max_queries) if q != question]
    return [question, *rest][:max_queries]


correction.keyword_queries = verbatim_first  # type: ignore[assignment]

if __name__ == "__main__":
    from crag.cli import app

    sys.argv = ["crag", "eval", *sys.argv[1:]]
    app()
