"""Trial groups: a verify whose trials' files cannot all fit the scratch space checks them a group at a time
(issue 43's first step; the files themselves go once trials cross processes as shared memory).

The reference job says what one trial takes (:class:`~kernelwright.jobs.ScratchNeed`) instead of writing; the
parent plans groups that fit (:func:`plan_groups`). Each special trial stays with the random trial it draws on (a
rewrite goes into its source's buffers, a repoison re-runs its source's inputs, a sparse trial changes a few of its
source's elements and is judged against its source's answer), so a group is a set of whole *units*. The first group
holds trial 0 (the work count, the semantics and the module state after it) and the timed input sets; the files of
those sets stay until the verdict (timing, baselines, the sanitizer, the executed profile and the decoys read them),
so the later groups share what is left. Each group is a reference job, a candidate job and its judging, and its
files go once judged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernelwright import jobs
from kernelwright.errors import InputError
from kernelwright.jobs import ScratchNeed, TrialSpec
from kernelwright.verify import tensors, trials
from kernelwright.verify.phases import BudgetSpent

if TYPE_CHECKING:
    from kernelwright.isolation.process import ChildRun
    from kernelwright.records import Status

GIB = 1 << 30


@dataclass(frozen=True)
class GroupPlan:
    """The groups, in the order they run (``groups[0]`` the first), and the trials of the first whose files stay
    until the verdict: its timed input sets, the first ``len(kept)`` random trials of its group."""

    groups: tuple[tuple[TrialSpec, ...], ...]
    kept: tuple[int, ...]

    def describe(self) -> str:
        sizes = ", ".join(str(len(g)) for g in self.groups)
        return f"{len(self.groups)} groups of {sizes} trials"


def units(plan: Sequence[TrialSpec]) -> list[tuple[TrialSpec, ...]]:
    """The plan as the units a group holds whole: each random trial with the special trials drawn on it, then each
    trial that draws on none (scaled, heavy-tailed, second shape), in the plan's order."""
    drawn: dict[int, list[TrialSpec]] = {}
    for t in plan:
        if t.source is not None:
            drawn.setdefault(t.source, []).append(t)
    out: list[tuple[TrialSpec, ...]] = []
    for t in plan:
        if t.source is None:
            out.append((t, *drawn.get(t.index, ())) if t.kind == trials.RANDOM else (t,))
    return out


def _bytes(unit: Sequence[TrialSpec], need: ScratchNeed) -> int:
    """What a unit's trials take while their group runs: the reference's files of each trial with its own answer
    and one candidate output file a trial."""
    own = sum(1 for t in unit if t.needs_own_reference)
    return own * need.trial_bytes + len(unit) * need.output_bytes


def plan_groups(plan: Sequence[TrialSpec], need: ScratchNeed, *, timed_sets: int) -> GroupPlan:
    """Groups of whole units that fit ``need.room_bytes`` each, with the first group's ``kept`` files (its first
    random trials, up to ``timed_sets`` of them: the timed input sets) beside every later one, and whose candidate
    job can hold its trials' inputs in ``need.device_room`` (where bounded). As many timed sets as leave room for
    the largest unit besides (at least one), and as few groups as first-fit in the plan's order gives. Raises a
    one-line :class:`InputError` naming the bytes needed and the bytes there where even trial 0's unit with one
    timed set, or some unit beside one kept trial, cannot fit."""
    all_units = units(plan)
    if not all_units or all_units[0][0].index != 0:
        raise ValueError("a plan's first unit is trial 0's")
    room = need.room_bytes
    for sets in range(max(1, timed_sets), 0, -1):
        found = _groups_with(all_units, need, sets)
        if found is not None:
            return GroupPlan(groups=tuple(_in_plan_order(g, plan) for g in found.groups), kept=found.kept)
    unit0 = _group_bytes(all_units[:1], need, 1)
    largest = max((_bytes(u, need) for u in all_units[1:]), default=0)
    wanted = max(unit0, largest + need.trial_bytes)
    fix = "set scratch_dir (KERNELWRIGHT_SCRATCH_DIR) to a larger disk or shrink the problem (--size NAME=VALUE)"
    if wanted <= room:  # the device is what cannot hold them
        device = max(_device_bytes(u, need) for u in all_units) + need.input_bytes + 2 * need.output_bytes
        raise InputError(f"even the smallest group of trials would hold ~{size(device)} of inputs on the device "
                         f"({size(need.input_bytes)} a trial) and a candidate's job may use {size(need.device_room)} "
                         "of it; shrink the problem (--size NAME=VALUE)")
    raise InputError(
        f"even the smallest group of trials needs ~{size(wanted)} of scratch files ({size(need.trial_bytes)} a trial: "
        f"inputs and the native and float64 answers; {size(need.output_bytes)} a candidate's output) and the scratch "
        f"space has room for {size(room)}; {fix}")


def _groups_with(all_units: list[tuple[TrialSpec, ...]], need: ScratchNeed, sets: int) -> GroupPlan | None:
    """:func:`plan_groups`'s groups with ``sets`` timed sets (fewer where the plan has fewer random trials), or
    None where they cannot fit."""
    first, rest = list(all_units[:1]), list(all_units[1:])
    # The first group's further random trials, for the timed sets: the next random units.
    while sum(1 for u in first for t in u if t.kind == trials.RANDOM) < sets:
        nxt = next((u for u in rest if u[0].kind == trials.RANDOM), None)
        if nxt is None:
            break
        first.append(nxt)
        rest.remove(nxt)
    randoms = [t.index for u in first for t in u if t.kind == trials.RANDOM][:sets]
    later_room = need.room_bytes - len(randoms) * need.trial_bytes

    def first_fits(group: list[tuple[TrialSpec, ...]]) -> bool:
        return _group_bytes(group, need, len(randoms)) <= need.room_bytes and _on_device(group, need, len(randoms))

    def later_fits(group: list[tuple[TrialSpec, ...]]) -> bool:
        return sum(_bytes(u, need) for u in group) <= later_room and _on_device(group, need, 0)

    if not first_fits(first) or not all(later_fits([u]) for u in rest):
        return None
    for u in list(rest):  # the first group filled further while it fits (its extra trials' files go once judged)
        if first_fits([*first, u]):
            first.append(u)
            rest.remove(u)
    groups = [tuple(t for u in first for t in u)]
    current: list[tuple[TrialSpec, ...]] = []
    for u in rest:
        if current and not later_fits([*current, u]):
            groups.append(tuple(t for v in current for t in v))
            current = []
        current.append(u)
    if current:
        groups.append(tuple(t for v in current for t in v))
    return GroupPlan(groups=tuple(groups), kept=tuple(randoms))


def _device_bytes(unit: Sequence[TrialSpec], need: ScratchNeed) -> int:
    """The trial inputs a unit's trials keep on the device in the candidate's job (an in-place trial's go into its
    source's buffers)."""
    return sum(1 for t in unit if not t.in_place) * need.input_bytes


def _on_device(group: Sequence[Sequence[TrialSpec]], need: ScratchNeed, timed: int) -> bool:
    """Whether a group's candidate job holds its trials' inputs, its timed sets' copies and two calls' outputs in
    the device memory it may use (always, where that is not bounded)."""
    if not need.device_room:
        return True
    held = sum(_device_bytes(u, need) for u in group) + timed * need.input_bytes + 2 * need.output_bytes
    return held <= need.device_room


def size(nbytes: int) -> str:
    """Bytes as a message says them: GB from a tenth of one, else MB."""
    return f"{nbytes / GIB:.1f} GB" if nbytes >= GIB // 10 else f"{nbytes / (1 << 20):.1f} MB"


def _group_bytes(group: Sequence[Sequence[TrialSpec]], need: ScratchNeed, timed: int) -> int:
    return sum(_bytes(u, need) for u in group) + timed * need.output_bytes


def _in_plan_order(group: Sequence[TrialSpec], plan: Sequence[TrialSpec]) -> tuple[TrialSpec, ...]:
    """A group's trials in the plan's order, as a job runs them (a rewrite after every random trial of its job)."""
    members = {t.index for t in group}
    return tuple(t for t in plan if t.index in members)


class GroupedChecking:
    """The trial-group methods of a verification (``self`` is a ``_Verification``, like the judging mixins)."""

    def _share_scratch(self) -> None:
        """Hold the scratch space's lock shared for this verify (verify/scratch_share.py)."""
        if not self.share.share(self.opts.deadline):
            raise BudgetSpent("reference (waiting for the scratch space)")
        self._note_scratch_wait()

    def _scratch_to_itself(self) -> bool:
        """Where the trials' files did not fit: wait until no other verify's files are in the scratch space. True
        where others were there (this verify's files are cleared and the reference measures the room again), False
        where this verify had it to itself already (the room it measured stands)."""
        waited = self.share.take_alone(self.opts.deadline)
        if waited is None:
            raise BudgetSpent("reference (waiting for the scratch space to itself)")
        self._note_scratch_wait()
        if waited:
            self._clear_reference_files()
        return waited

    def _clear_reference_files(self) -> None:
        """What a reference job wrote (its inputs, answers and state), before it runs again."""
        for folder in (self.shared, self.private):
            for leftover in folder.glob("*"):
                leftover.unlink()

    def _note_scratch_wait(self) -> None:
        if self.share.waited_s >= 0.05:
            self.phases["scratch_wait"] = round(self.share.waited_s, 2)

    def _plan_groups(self, need: ScratchNeed) -> None:
        """Split the plan into groups that fit (the first becomes the job now running), and say so in a note."""
        from kernelwright.config import config
        from kernelwright.records import Severity

        self.groups = plan_groups(self.plan, need, timed_sets=int(config.input_sets))
        self.job_trials = list(self.groups.groups[0])
        self.judge.add("trial-groups",
                       f"the trials' files need {size(need.trial_bytes)} a trial and the scratch space has room for "
                       f"{size(need.room_bytes)}: checked in {self.groups.describe()}, each group's files deleted "
                       f"once judged; the first group's {len(self.groups.kept)} random trial(s) stay for the timed "
                       "calls and the baselines", Severity.NOTE,
                       groups=[[t.index for t in g] for g in self.groups.groups], kept=list(self.groups.kept))

    def _later_groups(self, first_refs: dict[int, dict[str, Any]], semantics: jobs.Semantics
                      ) -> tuple[tuple[Status, str] | None, ChildRun | None, bool]:
        """Check the groups after the first, one at a time, each once the files of the one before are gone (the
        first group's kept trials stay: the later steps read them). ``first_refs`` keeps only those. Returns the
        failure (or None), the run that failed, and whether every output was judged right."""
        from kernelwright.verify.tool_steps import out_of_memory_beside_others

        assert self.groups is not None
        kept = set(self.groups.kept)
        first_job = (self.job_trials, self.expected_trials, self.profile_trial, self.expects_timing,
                     self.inspect_archs)
        without_own = list(self.trials_without_own)
        self._remember_outputs(first_refs)
        self._drop_files([t.index for t in self.job_trials if t.index not in kept])
        for index in [i for i in first_refs if i not in kept]:
            del first_refs[index]
        held = sum(t.numel() * t.element_size() for r in first_refs.values()
                   for t in [*(r.get("native") or ()), *(r.get("fp64") or ())])
        try:
            for group in self.groups.groups[1:]:
                self.job_trials = list(group)
                with self.clock.phase("reference"):
                    run, refs, _, _ = self._reference_job(self._reference_spec(group, held=held))
                    ref_trials = {t.index: t for t in run.reports(jobs.ReferenceTrial)}
                    self._notes(run)
                with self.clock.phase("candidate"):
                    cand = self._candidate(ref_trials, checks_only=True)
                    if out_of_memory_beside_others(cand):
                        self._drop_files([])
                        cand = self._candidate(ref_trials, alone=True, checks_only=True)
                failure = self._child_failure(cand)
                with self.clock.phase("judging"), self._device_judging():
                    judged = failure is None and self._judge_trials(cand, refs, ref_trials, semantics)
                without_own += self.trials_without_own
                for finding in cand.reports(jobs.ChildFinding):
                    self.judge.add(finding.code, finding.message, **finding.details)
                self._notes(cand)
                if failure is not None or not judged or self._integrity_failed():
                    return failure, cand, judged
                self._remember_outputs(refs)
                self._drop_files([t.index for t in group])
                del refs
        finally:
            (self.job_trials, self.expected_trials, self.profile_trial, self.expects_timing,
             self.inspect_archs) = first_job
            self.trials_without_own = without_own
        if self.trials_without_own and not self.opts.allow_library_only and not self.judge.has("no-own-kernel"):
            self._library_fallback()
        return None, None, True

    def _drop_files(self, indices: Sequence[int]) -> None:
        """The inputs of trials ``indices`` and every candidate output file: what a judged group leaves."""
        for index in indices:
            (self.shared / f"inputs-{index}.pt").unlink(missing_ok=True)
        for leftover in self.out.glob("*"):
            if leftover.is_file():
                leftover.unlink()

    def _remember_outputs(self, refs: dict[int, dict[str, Any]]) -> None:
        """The digests of a group's outputs and answers, kept for the replay check across groups (its files go)."""
        for index in self.expected_trials:
            key = self._output_key(index)
            if key:
                self.output_keys[index] = key
            if index in refs:
                self.answer_keys[index] = answer_key(refs[index], self.judge_device)


def answer_key(ref: dict[str, Any], device: str = "cpu") -> str:
    """A digest of a trial's native answer, computed on ``device`` (where the judging runs): two trials whose
    answers differ have different keys."""
    return "|".join(tensors.digest(o.to(device)) for o in ref.get("native", []))
