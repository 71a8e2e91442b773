"""The correctness trials of one verification — protocol rule 3 and integrity #8, #11, #12, #13, #34.

The parent plans them; the reference child makes their inputs and answers; the candidate child runs them. Every
trial's inputs come from a recorded seed, so ``--seed`` replays a failure exactly.
"""

from __future__ import annotations

from kernelwright.jobs.records import (  # noqa: F401 - the trial kinds and poisons, named where the record is
    HEAVY_TAILED,
    POISON_FINITE,
    POISON_NAN,
    RANDOM,
    REPOISON,
    REWRITE,
    SCALED,
    SHAPE,
    SPARSE,
    SPARSE_COPY,
    SPARSE_IN_PLACE,
    TrialSpec,
)

MIN_RANDOM_TRIALS = 5


def plan_trials(seed: int, random_trials: int = MIN_RANDOM_TRIALS, *, distribution: bool = True,
                second_shape: bool = True) -> list[TrialSpec]:
    """Random trials (at least five), an in-place rewrite of trial 0's buffers, a re-run of trial 1 under a
    different poison, trial 2's inputs with a few elements changed in its own buffers and trial 3's with a few
    changed in new ones, and — unless disabled — scaled, heavy-tailed and second-shape trials.

    Each special trial draws on a random trial of its own: by the in-place sparse trial, trial 0's buffers hold the
    rewrite's values, while trial 2's still hold trial 2's inputs, for which a cache keyed by their address and a few
    probed elements holds trial 2's answer."""
    n = max(MIN_RANDOM_TRIALS, random_trials)
    plan = [TrialSpec(index=i, kind=RANDOM, seed=seed + i) for i in range(n)]
    plan.append(TrialSpec(index=n, kind=REWRITE, seed=seed + n, source=0))
    plan.append(TrialSpec(index=n + 1, kind=REPOISON, seed=seed + 1, source=1, poison=POISON_FINITE))
    plan.append(TrialSpec(index=n + 2, kind=SPARSE_IN_PLACE, seed=seed + n + 2, source=2))
    plan.append(TrialSpec(index=n + 3, kind=SPARSE_COPY, seed=seed + n + 3, source=3))
    extra = []
    if distribution:
        extra += [SCALED, HEAVY_TAILED]
    if second_shape:
        extra.append(SHAPE)
    for offset, kind in enumerate(extra):
        index = n + 4 + offset
        plan.append(TrialSpec(index=index, kind=kind, seed=seed + index))
    return plan

def forward_seed(seed: int) -> int:
    """The global RNG's seed set right before a trial's forward (``seed``: the trial's), in the reference's runs
    (native and float64) and the candidate's alike, as KernelBench's harness seeds before each model call: a forward
    that draws random numbers itself (level 3's 35_LSTM draws its initial states with ``torch.randn``) draws the
    same ones in both, whatever each process did with the generator before. A repoison trial reuses its source's
    seed, so its draws are its source's too; a sparse trial has its own (its inputs are new, and so is its answer)."""
    return (seed * 0x9E3779B1 + 0x5EED) % (1 << 31)


# The module buffers a problem's forward changes in its first trial (a training-mode batch norm's running
# statistics): the reference child writes them under its private directory, the candidate child its own under its
# output directory, and the parent compares them.
STATE_FILE = "state-0.pt"
