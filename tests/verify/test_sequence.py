"""The candidate job's messages judged as the harness's sequence (verify/sequence.py), on recorded sequences."""

from __future__ import annotations

from kernelwright.jobs.records import Measurement
from kernelwright.verify.sequence import missing_evidence, sequence_errors

PLAN = [0, 1, 2]


def _honest(*, profile: int = 1, timing: bool = False) -> list[dict]:
    seq: list[dict] = [{"event": "finding", "code": "x"}, {"event": "device"}, {"event": "weights"}]
    for i in PLAN:
        seq.append({"event": "trial_start", "index": i})
        if i == profile:
            seq.append({"event": "kernels"})
        seq.append({"event": "trial", "index": i, "triton_launches": {"k": 1}})
    if timing:
        seq += [{"event": "phase", "name": "timing"}, {"event": "timing"}]
    seq += [{"event": "phase", "name": "instructions"}, {"event": "note", "message": "m"},
            {"event": "cubin", "name": "k", "arch": "sm_90a"}, {"event": "done"}]
    return seq


def _errors(seq: list[dict], timing: bool = False) -> list[str]:
    return sequence_errors(seq, plan=PLAN, profile_trial=1, expects_timing=timing)


def test_the_harness_sequence_is_clean_on_the_cpu_and_the_gpu() -> None:
    assert _errors(_honest()) == []
    assert _errors(_honest(timing=True), timing=True) == []
    assert missing_evidence(_honest(), plan=PLAN, profile_trial=1, expects_timing=False,
                            inspect_archs=("sm_90a",), native=False) == []


def test_forged_duplicate_and_misplaced_messages_are_named() -> None:
    forged = _honest()
    forged.insert(forged.index({"event": "trial", "index": 2, "triton_launches": {"k": 1}}), {"event": "kernels"})
    assert any("outside the profiled trial" in e for e in _errors(forged))
    twice = _honest()
    twice.insert(3, {"event": "weights"})
    assert any("second 'weights'" in e for e in _errors(twice))
    early = _honest()[:6] + [{"event": "done"}]  # a 'done' in the middle of the trials
    assert any("before the job's end" in e for e in _errors(early))
    after = [*_honest(), {"event": "timing"}]
    assert any("after 'done'" in e for e in _errors(after))
    skipped = [m for m in _honest() if m.get("index") != 1 or m["event"] == "kernels"]
    assert any("plan's next was 1" in e for e in _errors(skipped))
    assert any("outside the timing phase" in e for e in _errors([*_honest()[:-1], {"event": "timing"}]))


def test_an_error_ends_the_sequence_and_only_done_may_follow() -> None:
    seq = [{"event": "device"}, {"event": "trial_start", "index": 0}, {"event": "error"}, {"event": "done"}]
    assert _errors(seq) == []
    assert _errors([*seq[:3], {"event": "trial", "index": 0}, {"event": "done"}]) != []


def test_what_a_pass_depends_on_is_missing_evidence() -> None:
    def missing(seq, **kw):
        return missing_evidence(seq, plan=PLAN, profile_trial=1, expects_timing=kw.get("timing", False),
                                inspect_archs=("sm_90a",), native=kw.get("native", False))

    no_cubin = [m for m in _honest() if m["event"] != "cubin"]
    assert missing(no_cubin) == ["the compiled k for sm_90a"]
    explained = [*no_cubin[:-1], {"event": "note", "message": "compiling k for sm_90a failed"}, {"event": "done"}]
    assert missing(explained) == []
    assert missing([m for m in _honest() if m["event"] != "kernels"]) == ["the kernel list of trial 1"]
    assert missing(_honest(), timing=True) == ["timing"]
    assert missing([m for m in _honest() if m.get("name") != "instructions"])[0].startswith("the instruction summary")
    assert "the compiled k for native" in missing(_honest(), native=True)


def test_the_parent_recomputes_the_timing_summary_from_its_samples() -> None:
    samples = (0.5, 0.1, 0.3, 0.2, 0.4)
    m = Measurement.from_samples(samples, host_ms_per_call=1.0, flush_ms=0.1, unexplained_ms_per_call=0.0)
    assert (m.median_ms, m.min_ms, m.q1_ms, m.q3_ms, m.reps) == (0.3, 0.1, 0.2, 0.4, 5)
    assert abs(m.mean_ms - 0.3) < 1e-12 and m.samples_ms == samples
    lie = Measurement(median_ms=0.001, min_ms=0.1, q1_ms=0.2, q3_ms=0.4, mean_ms=0.3, reps=5, host_ms_per_call=1.0,
                      flush_ms=0.1, unexplained_ms_per_call=0.0, samples_ms=samples)
    assert m.summary_matches(m) and not lie.summary_matches(m)
