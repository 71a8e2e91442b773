"""search.run(SearchRequest): one entry for optimize, generate and bench; the request's Deadline reaches the search
as the same object."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.deadline import Deadline
from kernelwright.errors import InputError
from kernelwright.search.request import LLMOptions, SearchRequest, run


def test_each_generator_reaches_its_search_with_the_requests_deadline(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelwright.search import llm_search, optimize

    seen: list[tuple[str, dict]] = []
    monkeypatch.setattr(optimize, "optimize", lambda problem, **kw: seen.append(("templates", kw)) or "t")
    monkeypatch.setattr(llm_search, "optimize_with_llm", lambda problem, **kw: seen.append(("llm", kw)) or "l")
    deadline = Deadline.after(30.0)
    request = SearchRequest(problem=tmp_path / "p.py", out_dir=tmp_path / "out", deadline=deadline,
                            backend="cuda", use_model=False, verify_allowance_s=5.0)
    assert run(request) == "t"
    kind, kw = seen[-1]
    assert kind == "templates" and kw["deadline"] is deadline and kw["backend"] == "cuda"
    assert kw["use_model"] is False and kw["verify_allowance_s"] == 5.0
    hybrid = SearchRequest(problem=tmp_path / "p.py", out_dir=tmp_path / "out", deadline=deadline,
                           generator="hybrid", llm=LLMOptions(strategy="evolve", samples=2, resume=7))
    assert run(hybrid) == "l"
    kind, kw = seen[-1]
    assert kind == "llm" and kw["deadline"] is deadline and kw["generator"] == "hybrid"
    assert (kw["strategy"], kw["samples"], kw["resume"]) == ("evolve", 2, 7)


def test_an_unknown_generator_is_one_line() -> None:
    with pytest.raises(InputError, match="unknown generator 'gpt'"):
        SearchRequest(problem=Path("p.py"), out_dir=Path("o"), deadline=Deadline.after(1.0), generator="gpt")
