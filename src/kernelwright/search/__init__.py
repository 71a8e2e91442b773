"""The search: candidates from a generator, timed, the finalists verified, the best kept (issue 5, 6).

``kernelwright.search.run(SearchRequest(...))`` is the one entry: optimize's and generate's command lines and every
bench task call it (:mod:`.request`)."""

from kernelwright.search.request import LLMOptions, SearchRequest, run

__all__ = ["LLMOptions", "SearchRequest", "run"]
