"""The verifier's judgement of the job boundary (integrity #31-#33, #35): what the candidate's process could not
have written alone — its message sequence, its box, the evidence a pass depends on, the kernel list against its
own launches, the timing summary recomputed from raw samples. A part of the verification
(:class:`kernelwright.verify.verifier._Verification` mixes it in), like :mod:`kernelwright.verify.judging`."""

from __future__ import annotations

from kernelwright import jobs
from kernelwright.isolation.process import ChildRun
from kernelwright.records import Severity


class BoundaryJudging:
    """The boundary methods of a verification (``self`` is a ``_Verification``)."""

    def _unreported(self, run: ChildRun) -> list[str]:
        """What a pass depends on that the candidate's job did not report (verify/sequence.py): each trial, the
        kernel list, the timing, the instruction summary of every own kernel that ran, and each call's integrity
        checks. The candidate can write to the channel as well: a forged "done" or phase message proves nothing."""
        from kernelwright.verify.sequence import missing_evidence

        missing = missing_evidence(run.messages, plan=self.expected_trials, profile_trial=self.profile_trial,
                                   expects_timing=self.expects_timing, inspect_archs=self.inspect_archs,
                                   native=self.device == "cuda")
        for trial in run.reports(jobs.CandidateTrial):
            lacking = [c for c in ("identities", "background") if c not in trial.checks]
            if lacking:
                missing.append(f"the {' and '.join(lacking)} check(s) of trial {trial.index}")
        timed = run.report(jobs.TimingResult)
        if timed is not None and not {"identities", "background"} <= set(timed.checks):
            missing.append("the checks after the timed calls")
        return missing

    def _boundary(self, run: ChildRun) -> None:
        """The job's box and its message sequence: what the candidate's process could not have written alone."""
        from kernelwright.verify.sequence import sequence_errors

        for message in run.protocol_errors[:3]:
            self.judge.add("protocol-violation", message)
        for message in sequence_errors(run.messages, plan=self.expected_trials, profile_trial=self.profile_trial,
                                       expects_timing=self.expects_timing)[:3]:
            self.judge.add("protocol-violation", f"out of the harness's sequence: {message}")
        if run.escaped:
            shown = "; ".join(run.escaped[:3])
            self.judge.add("background-process", f"{len(run.escaped)} process(es) the candidate started outlived its "
                           f"job ({shown}); the box ended them", processes=list(run.escaped))
        elif run.leftover_processes:
            self.judge.add("background-process", "the candidate left processes running after its job ended")
        if not run.timed_out and not run.box and run.box_notes:  # the keeper never reported: it was killed
            self.judge.add("protocol-violation", f"the candidate's box broke: {run.box_notes[0]}")
        elif run.box and run.box not in ("namespace", "user-namespace"):
            self.judge.add("containment", f"the candidate's job ran in a {run.box} box (no PID and mount namespace "
                           "here): a process it starts is ended with it, but it could write the shared caches",
                           Severity.WARNING, box=run.box)
        for note in run.box_notes if run.box else ():
            self.judge.add("containment", f"the candidate's box: {note}", Severity.NOTE)

    def _timing_from_samples(self, reported: jobs.Measurement) -> jobs.Measurement | None:
        """The candidate's timing summary, computed here from its raw samples (integrity #35): a summary that does
        not match them, or none to compute from, is the candidate's writing, not the harness's."""
        if not reported.samples_ms:
            self.judge.add("evidence-missing", "the timing came without its raw samples")
            return None
        own = jobs.Measurement.from_samples(reported.samples_ms, host_ms_per_call=reported.host_ms_per_call,
                                            flush_ms=reported.flush_ms,
                                            unexplained_ms_per_call=reported.unexplained_ms_per_call)
        if not reported.summary_matches(own):
            self.judge.add("protocol-violation", f"the timing summary (median {reported.median_ms:.4f} ms) does not "
                           f"match its own samples (median {own.median_ms:.4f} ms)")
        return own

    def _cross_check_kernels(self, run: ChildRun) -> None:
        """The kernel list against the profiled trial's own launches: on the CPU every own Triton kernel it names
        must be among that call's launches, and a list without one where the call launched some is not the
        harness's (both are written in one place by the harness)."""
        if self.device == "cuda":
            return
        trial = next((t for t in run.reports(jobs.CandidateTrial) if t.index == self.profile_trial), None)
        if trial is None:
            return
        launched = set(trial.triton_launches) | set(trial.extension_calls)
        named = {k.name for k in self.kernels if k.origin == "own"}
        stray = sorted(named - launched)
        if stray or (launched and not named):
            why = (f"names own kernel(s) {', '.join(stray[:3])} that trial {trial.index} did not launch" if stray
                   else f"names none of the kernels trial {trial.index} launched ({', '.join(sorted(launched)[:3])})")
            self.judge.add("protocol-violation", f"the kernel list {why}: it is not the harness's")
