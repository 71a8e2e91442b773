"""The verifier's judging of the candidate's outputs, trial by trial: each output against the reference's (the
tolerance of :mod:`kernelwright.verify.compare`), the module state after the calls, the replayed and timed calls'
answers. A part of the verification (:class:`kernelwright.verify.verifier._Verification` mixes it in), kept apart
so that the orchestration reads as the protocol: it uses the verification's plan, judge, policy and device."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from kernelwright import jobs
from kernelwright.isolation import protocol
from kernelwright.isolation.process import ChildRun
from kernelwright.records import Severity
from kernelwright.verify import compare, tensors, trials
from kernelwright.verify.findings import SPECIAL_TRIAL_CODES
from kernelwright.verify.records import TrialOutcome

UNREPORTED = jobs.ReferenceTrial(index=-1, kind="unreported")  # a trial the reference said nothing of

# Copies and fills: in nearly every program, so not evidence that a candidate re-runs the reference.
_TRIVIAL_KERNEL = re.compile(r"memcpy|memset|fill|copy|zero|clone|contiguous", re.I)


class TrialJudging:
    """The output-judging methods of a verification (``self`` is a ``_Verification``)."""

    def _judge_trials(self, run: ChildRun, refs: dict[int, dict[str, Any]],
                      ref_trials: dict[int, jobs.ReferenceTrial], semantics: jobs.Semantics) -> bool:

        random_ok = True
        by_index = {t.index: t for t in self.plan}
        reports = run.reports(jobs.CandidateTrial)
        self.trials_without_own = trials_without_own(reports)
        for message in reports:
            index = message.index
            trial = by_index.get(index)
            if trial is None:  # written by the candidate: the harness reports only the trials it was given
                self.judge.add("protocol-violation", f"a report of trial {index}, which was never planned")
                continue
            ref = refs.get(trial.source if trial.kind == trials.REPOISON else index)
            if ref is None:
                continue
            expected = ref["native"]
            problems = []
            for i, type_name in enumerate(message.output_types):
                if type_name != "torch.Tensor":
                    self.judge.add("output-subclass",
                                   f"output {i} is a {type_name}, not a plain torch.Tensor: a subclass can make any "
                                   "comparison succeed", type=type_name)
                    problems.append(f"output {i} is a {type_name}")
            try:
                got = tensors.load(self.out / f"out-{index}.pt")
            except Exception as exc:
                got = []
                problems.append(f"its outputs could not be read back safely ({type(exc).__name__})")
            problems += compare.structure_problems(got, expected, self.device) if not problems else []
            if not problems:
                # One tensor and a one-element tuple/list flatten alike; a caller of the op does not see them alike.
                source_trial = ref_trials.get(trial.source if trial.kind == trials.REPOISON else index, UNREPORTED)
                want, have = tensors.result_shape(source_trial.container), tensors.result_shape(message.container)
                if want and have and want != have:
                    problems.append(f"forward returns a {message.container} where the problem returns a "
                                    f"{source_trial.container}")
            mutated = list(message.mutated_inputs)
            if mutated and not semantics.mutates_inputs:
                self.judge.add("input-mutation", f"forward changed its input(s) {mutated} in place (trial {index})",
                               inputs=mutated)
            aliased = [j for j in message.aliased_outputs if j not in semantics.outputs_alias_inputs]
            if aliased:
                self.judge.add("output-aliases-input", f"output(s) {aliased} share memory with an input")
            if message.late_writes:
                self.judge.add("background-thread",
                               f"output(s) {list(message.late_writes)} changed after forward returned: work is still "
                               "running in the background")
            comparisons = []
            if not problems:
                fp64 = ref.get("fp64")
                for j, (g, e) in enumerate(zip(got, expected)):
                    comparisons.append(self._compare(g, e, fp64[j] if fp64 else None))
            ok = not problems and all(c.ok for c in comparisons)
            note = "; ".join(problems) or "; ".join(
                f"output {j}: {c.reason}" for j, c in enumerate(comparisons) if not c.ok)
            self.judge.outcomes[index] = TrialOutcome(
                index=index, kind=trial.kind, seed=trial.seed if trial.kind != trials.REPOISON else None,
                status="ok" if ok else "wrong", note=note or ref_trials.get(index, UNREPORTED).note,
                comparisons=tuple(c.to_json() for c in comparisons))
            if ok:
                continue
            if trial.kind == trials.RANDOM:
                random_ok = False
                if problems:
                    self.judge.add("output-structure", f"trial {index}: {problems[0]}")
                else:
                    stale = any(c.nonfinite_mismatches and c.worst_got is not None and c.worst_got != c.worst_got
                                for c in comparisons)
                    if stale and trial.poison == trials.POISON_NAN:
                        self.judge.add("stale-memory",
                                       f"trial {index}: output elements hold the NaN poison of unwritten memory "
                                       f"({note})")
                    for j, c in enumerate(comparisons):
                        signature = compare.precision_signature(c, expected[j].dtype)
                        if signature and not self.allowed_roundoff:
                            self.judge.add("precision",
                                           f"output {j} has the rounding noise of {signature}: lower precision "
                                           f"arithmetic in a {str(expected[j].dtype).removeprefix('torch.')} "
                                           "problem", trial=index)
                    self.judge.add("mismatch", f"trial {index} (seed {trial.seed}): {note}")
        self._replayed_outputs(by_index, refs)
        random_ok = self._judge_state(run) and random_ok
        if random_ok:
            for index, outcome in sorted(self.judge.outcomes.items()):
                trial = by_index[index]
                if outcome.status == "wrong" and trial.kind in SPECIAL_TRIAL_CODES:
                    code, template = SPECIAL_TRIAL_CODES[trial.kind]
                    detail = ref_trials.get(index, UNREPORTED).note
                    message = template.format(source=trial.source, note=detail or trial.kind) + f" — {outcome.note}"
                    if self._imprecise_only(trial, outcome):
                        # KernelBench's fixed tolerance does not scale with the values: finite, slightly-off outputs
                        # at other magnitudes or shapes are imprecision, not evidence of a shortcut.
                        self.judge.add(code, message + " (under KernelBench's fixed tolerance: imprecision at these "
                                       "values, not necessarily a shortcut)", trial=index, imprecision=True)
                    else:
                        self.judge.add(code, message, trial=index)
        return random_ok and not self.judge.has("output-structure")

    def _judge_kernels(self, run: ChildRun) -> None:
        listed = run.report(jobs.Kernels)
        self.kernels: list[jobs.KernelRecord] = list(listed.kernels) if listed else []
        if listed is None or run.report(protocol.JobError):  # no list at all: evidence-missing says so
            return
        self._cross_check_kernels(run)
        # The very kernel (full signature) the reference's PyTorch ran: a same-named decoy compiled by the candidate
        # does not make the library's work its own.
        self.kernels = [replace(k, origin="library", source="cuda")
                        if k.origin == "own" and k.name in self.reference_kernels else k for k in self.kernels]
        reference = [n for n in self.reference_kernels if not _TRIVIAL_KERNEL.search(n)]
        own = [k for k in self.kernels if k.origin == "own"]
        library = {k.name for k in self.kernels if k.origin != "own"}
        if own and reference and set(reference) <= library and not self.opts.allow_library_only:
            self.judge.add("no-own-kernel",
                           f"the candidate's library calls already run every kernel of the reference "
                           f"({', '.join(n[:50] for n in reference[:3])}); its own kernel(s) "
                           f"({', '.join(k.name[:40] for k in own[:3])}) only add to them",
                           reference_kernels=reference)
        total = sum(k.device_time_us or 0.0 for k in self.kernels)
        own_time = sum(k.device_time_us or 0.0 for k in own)
        if not own and not self.opts.allow_library_only:
            names = ", ".join(k.name[:60] for k in self.kernels[:4])
            self.judge.add("no-own-kernel",
                           f"the candidate launched no kernel of its own, only library work ({names}); "
                           "pass --allow-library-only to accept that", library=[k.name for k in self.kernels])
        elif self.trials_without_own and not self.opts.allow_library_only:
            self._library_fallback()
        if own and total and own_time / total < 0.5:
            self.judge.add("library-share",
                           f"library kernels take {100 * (1 - own_time / total):.0f}% of the candidate's device time",
                           Severity.NOTE, own_share=own_time / total)
        if any(k.streams for k in self.kernels):
            streams = sorted({s for k in self.kernels for s in k.streams})
            if len(streams) > 1:
                self.judge.add("multiple-streams", f"kernels ran on {len(streams)} streams {streams}",
                               Severity.NOTE, streams=streams)

    def _library_fallback(self) -> None:
        """The ``no-own-kernel`` finding of checked calls on which the library did all the work."""
        listed = ", ".join(map(str, self.trials_without_own[:6]))
        self.judge.add("no-own-kernel",
                       f"trial(s) {listed} launched no kernel of the candidate's own: on those calls the library "
                       "did all the work (a fallback taken on some calls)", trials=self.trials_without_own)

    def _judge_state(self, run: ChildRun) -> bool:
        """The module state the problem's forward changes must be the reference's after the first trial (verify/
        state.py); False, with a ``module-state`` finding, where it is not."""
        weights = run.report(jobs.Weights)
        if 0 not in self.expected_trials:
            return True  # a later trial group (verify/groups.py): the first group's job ran trial 0
        if not self.ref_state or weights is None or not weights.source.startswith("copied"):
            return True  # nothing changes, or the candidate's own weights (its state is its own): not comparable
        from kernelwright.verify.state import state_problems

        wrong = state_problems(self.ref_state, self.out / trials.STATE_FILE, self._compare, self.ref_state64)
        if wrong:
            self.judge.add("module-state", "after the first trial the module's state differs from the reference's: "
                           + "; ".join(wrong[:3]), buffers=sorted(self.ref_state))
        return not wrong

    def _imprecise_only(self, trial: trials.TrialSpec, outcome: TrialOutcome) -> bool:
        return (self.opts.tolerance == "kernelbench" and trial.kind in (trials.SCALED, trials.HEAVY_TAILED, trials.SHAPE)
                and bool(outcome.comparisons)
                and all(not c.get("nonfinite_mismatches") for c in outcome.comparisons))

    def _replayed_outputs(self, by_index: dict[int, trials.TrialSpec], refs: dict[int, dict[str, Any]]) -> None:
        """A trial whose output is bit-identical to an earlier trial's output, where the right answers differ, was
        replayed from a cache (integrity #8). Across trial groups (verify/groups.py) the earlier groups' digests
        stand in for their files, which are gone; only this job's trials are accused."""
        from kernelwright.verify.groups import answer_key

        def answer(index: int) -> str:
            return answer_key(refs[index], self.judge_device) if index in refs else self.answer_keys.get(index, "")

        if not any(o.status == "wrong" for o in self.judge.outcomes.values()):
            return  # only a wrong trial can be a replay: nothing to read back
        current = set(self.expected_trials)
        seen: dict[str, int] = {}
        for index in sorted(self.judge.outcomes):
            trial = by_index[index]
            if trial.kind == trials.REPOISON:
                continue
            key = self._output_key(index) if index in current else self.output_keys.get(index, "")
            if not key:
                continue
            wrong = self.judge.outcomes[index].status == "wrong"
            if wrong and index in current and key in seen and answer(seen[key]) != answer(index):
                self.judge.add("output-caching", _replay_message(trial, seen[key]), trial=index, replayed=seen[key])
            else:
                seen[key] = index

    def _output_key(self, index: int) -> str:
        """A digest of a checked call's outputs as its file holds them ("" where there is none or every output
        holds one value throughout: never written, the poison, zeros repeat without any cache)."""
        path = self.out / f"out-{index}.pt"
        if not path.exists():
            return ""
        try:
            outputs = tensors.load(path)
        except Exception:
            return ""
        # Where the judging runs: a GPU's digest of a gigabyte takes milliseconds where the host's takes seconds.
        on = [o.to(self.judge_device) for o in outputs]
        return "|".join(tensors.digest(o) for o in on if o.numel() > 16 and not tensors.uniform(o))

    def _judge_timed_outputs(self, timed_trials: tuple[int, ...], refs: dict[int, dict[str, Any]]) -> None:

        for set_index in timed_trials:
            ref = refs.get(set_index)
            path = self.out / f"timed-{set_index}.pt"
            if ref is None or not path.exists():
                continue
            got = tensors.load(path)
            if compare.structure_problems(got, ref["native"], self.device):
                self.judge.add("timed-call-mismatch", "the outputs of timed calls differ in structure from the "
                                                      "outputs of checked calls")
                return
            fp64 = ref.get("fp64")
            for j, (g, e) in enumerate(zip(got, ref["native"])):
                c = self._compare(g, e, fp64[j] if fp64 else None)
                if not c.ok:
                    self.judge.add("timed-call-mismatch",
                                   f"a timed call returned a wrong answer (input set {set_index}, output {j}: "
                                   f"{c.reason}); the candidate behaves differently while timed")
                    return


def _replay_message(trial: trials.TrialSpec, replayed: int) -> str:
    """What a trial that returned exactly an earlier trial's output shows: a sparse trial that returned its own
    source's answer was served by a cache that looked at a few elements (or the address), not at all of them."""
    if trial.kind in trials.SPARSE and replayed == trial.source:
        return (f"trial {trial.index} returned exactly the output of trial {replayed}, whose inputs differ from its "
                "own in only a few elements: the answer is stale, cached by a few probed elements or by the data "
                "pointer")
    return (f"trial {trial.index} returned exactly the output of trial {replayed}, whose inputs were different: "
            "outputs are replayed from a cache")


def trials_without_own(reports: Sequence[jobs.CandidateTrial]) -> list[int]:
    """Checked calls that ran no kernel of the candidate's own, read from the job's reports (the child's
    verify/child/launches.py counts, the parent judges). On a GPU every checked call is profiled: the device kernels
    decide. On the CPU the launches seen from Python decide, and only when some call showed one (an accounting that
    sees none anywhere says nothing about single calls; the kernel list then decides)."""
    profiled = [t for t in reports if t.own_device_kernels is not None]
    if profiled:
        return [t.index for t in profiled if not t.own_device_kernels]
    if not any(t.own_calls > 0 for t in reports):
        return []
    return [t.index for t in reports if t.own_calls == 0]
