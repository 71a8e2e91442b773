"""One search, whoever asks for it: ``kernelwright optimize``, ``kernelwright generate`` and a bench task each build a
:class:`SearchRequest` and call :func:`run`, which hands it to the template search (:mod:`.optimize`) or the LLM
loop (:mod:`.llm_search`, ``llm`` and ``hybrid``).

The request carries the budget as one :class:`~kernelwright.deadline.Deadline` (made where the command starts),
which reaches every child job the search starts unchanged; a bench task, which may run on another machine, makes
its own from its per-problem seconds when it starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelwright.deadline import Deadline
from kernelwright.errors import InputError
from kernelwright.records import DEFAULT_POLICY, Policy

GENERATORS = ("templates", "llm", "hybrid")


@dataclass(frozen=True, kw_only=True)
class LLMOptions:
    """What only the LLM loop reads (``--strategy``, ``--samples``, the endpoint, ``--resume`` and its limits)."""

    strategy: str = "refine"
    samples: int = 4
    model: str | None = None
    base_url: str | None = None
    resume: int | None = None  # a run of the database to go on with
    max_candidates: int | None = None
    max_tokens: int | None = None
    language: str = "triton"
    seed: int = 0


@dataclass(frozen=True, kw_only=True)
class SearchRequest:
    problem: Path
    out_dir: Path
    deadline: Deadline  # the search's end, its finalists' verifies included (plus verify_allowance_s)
    generator: str = "templates"  # one of GENERATORS
    device: str | None = None  # None/"auto": a GPU if there is one
    arch: str | None = None  # None: the local GPU's, else config.arch
    policy: Policy = DEFAULT_POLICY
    backend: str | None = None  # the template back ends (--backend; None: config.backend)
    use_model: bool = True  # the cost model orders what a GPU times, template mutations too (--no-model: not)
    ptx_rewrites: bool = True  # the template search times its leader's PTX rewrites (--no-ptx-rewrites: not)
    verify_allowance_s: float = 0.0  # how long a finalist's verify may run past the deadline (a bench's rows)
    db_path: Path | None = None  # the run database (None: the cache's runs.sqlite)
    llm: LLMOptions = field(default_factory=LLMOptions)
    evaluator: Any = None  # an Evaluator to use instead of the device's (a bench's reused baselines, tests)
    progress: Any = None  # the template search's Progress, or the LLM loop's stream for its progress line

    def __post_init__(self) -> None:
        if self.generator not in GENERATORS:
            raise InputError(f"unknown generator {self.generator!r}: choose one of {', '.join(GENERATORS)}")


def run(request: SearchRequest) -> Any:
    """The search ``request`` asks for: an :class:`~kernelwright.search.records.OptimizeResult` (templates) or a
    :class:`~kernelwright.search.records.SearchResult` (llm, hybrid). Raises
    :class:`~kernelwright.errors.InputError` for a problem the search cannot take."""
    if request.generator == "templates":
        from kernelwright.search.optimize import optimize

        return optimize(request.problem, out_dir=request.out_dir, deadline=request.deadline, device=request.device,
                        arch=request.arch, policy=request.policy, evaluator=request.evaluator,
                        progress=request.progress, db_path=request.db_path,
                        verify_allowance_s=request.verify_allowance_s, backend=request.backend,
                        use_model=request.use_model, ptx_rewrites=request.ptx_rewrites)
    from kernelwright.search.llm_search import optimize_with_llm

    o = request.llm
    return optimize_with_llm(request.problem, out_dir=request.out_dir, deadline=request.deadline,
                             generator=request.generator, strategy=o.strategy, samples=o.samples,
                             device=request.device, arch=request.arch, policy=request.policy, model=o.model,
                             base_url=o.base_url, db_path=request.db_path, resume=o.resume,
                             max_candidates=o.max_candidates, max_tokens=o.max_tokens, language=o.language,
                             seed=o.seed, evaluator=request.evaluator, progress_stream=request.progress,
                             verify_allowance_s=request.verify_allowance_s, use_model=request.use_model)
