"""The child protocol's records: every spec and report written and read back alike, the wire as it was, and what a
line that is not its record becomes (whatever runs in the candidate's child can write to the channel)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from kernelwright import jobs as j
from kernelwright.isolation import protocol as p
from kernelwright.isolation.process import ChildRun

MEASUREMENT = j.Measurement(median_ms=0.5, min_ms=0.4, q1_ms=0.45, q3_ms=0.55, mean_ms=0.5, reps=100,
                            host_ms_per_call=0.6, flush_ms=0.1, unexplained_ms_per_call=0.0)
CANDIDATE_TRIAL = j.CandidateTrial(
    index=0, kind="random", output_types=("torch.Tensor",),
    outputs=(j.TensorInfo(shape=(4, 8), dtype="float32", stride=(8, 1), device="cpu", contiguous=True),),
    container="tensor", mutated_inputs=(), aliased_outputs=(), late_writes=(1,), triton_launches={"k": 1},
    extension_calls={}, own_calls=1, own_device_kernels=None, device_kernels=None, wall_s=0.25)
TIMING = j.TimingResult(measurement=MEASUREMENT, side_stream=False, timed_trials=(0, 1), calls_without_own_kernel=0,
                        timed_calls=100)

SAMPLES: list[tuple[str, p.Report]] = [
    ("reference", j.DeviceFacts(facts={"type": "cpu", "torch": "2.5", "triton": None})),
    ("reference", j.ReferenceTrial(index=0, kind="random", seed=7, inputs=(j.TensorInfo(shape=(4, 8), dtype="float32"), "3"),
                                   outputs=(j.TensorInfo(shape=(4, 8), dtype="float32"),), container="tensor", finite=True,
                                   fp64=True, n_tensor_inputs=1)),
    ("reference", j.ReferenceTrial(index=6, kind="repoison", source=1)),
    ("reference", j.ReferenceTrial(index=9, kind="shape", skipped="no size global can change")),
    ("reference", j.Work(work=j.WorkCount(matmul_flops={"float32": 1.0}, elementwise_flops=2.0, input_bytes=3.0,
                                          output_bytes=4.0, parameter_bytes=0.0, kinds=("matmul",)))),
    ("reference", j.Semantics(outputs_alias_inputs=(0,), mutates_inputs=True)),
    ("reference", j.ReferenceKernels(names=("aten::softmax",), method="aten-dispatch")),
    ("reference", j.ScratchNeed(trial_bytes=12 << 30, output_bytes=3 << 30, room_bytes=90 << 30,
                                input_bytes=6 << 30, device_room=60 << 30)),
    ("candidate", j.Weights(source="copied from the reference's state_dict")),
    ("candidate", j.TrialStart(index=0, kind="random")),
    ("candidate", CANDIDATE_TRIAL),
    ("candidate", j.Kernels(kernels=(j.KernelRecord(name="k", origin="own", source="cuda", launches=2,
                                                    device_time_us=3.5, streams=(7,)),), method="profiler")),
    ("candidate", j.ChildFinding(code="persisting-l2", message="a window", details={"window_bytes": 1 << 20})),
    ("candidate", j.Phase(name="timing")),
    ("candidate", TIMING),
    ("candidate", j.Cubin(name="k", arch="native", path="/o/k.cubin", ptx_path="/o/k.ptx", n_regs=32, n_spills=0,
                          shared=0, num_warps=4)),
    ("candidate", j.Cubin(name=None, arch="sm_90a", path="/o/e.cubin", ptx_path="/o/e.ptx", ptxas_log="0 spills")),
    ("candidate", j.Binary(name="ext", path="/cache/ext.so")),
    ("candidate", j.CudaBuild(name="ext", arch="sm_90a", result=j.BuildResult(ok=None, log="not compiled: no nvcc"))),
    ("candidate", p.Note(code="profiler-unavailable", message="no CUPTI")),
    ("candidate", p.JobError(status="runtime_error", code="exception", message="ValueError: no", detail="tb")),
    ("candidate", p.LockWait(seconds=1.5)),
    ("candidate", p.Done()),
    ("baseline", j.BaselineResult(name="eager", measurement=MEASUREMENT)),
    ("baseline", j.BaselineResult(name="compile", measurement=None, error="RuntimeError: x", detail="tb")),
    ("baseline", j.Ceilings(ceilings={"fp32_tflops": 60.0})),
    ("tune", j.TuneStart(index=3)),
    ("tune", j.Tuned(index=3, ok=True, measurement=MEASUREMENT)),
    ("tune", j.Tuned(index=4, ok=False, error="wrong output: output 0: max abs error 1")),
    ("probe", j.ProbeResult(ok=True, message="ran on cpu", outputs=(j.TensorInfo(shape=(2,), dtype="float32"),),
                            reduced_sizes={"N": 8}, seconds=0.1)),
    ("export_probe", j.ExportProbeResult(result={"ok": False, "message": "the problem defines no class Model"})),
    ("sanitize", j.SanitizeRan(seconds=0.4, sizes={"N": 64})),
]


@pytest.mark.parametrize(("job", "report"), SAMPLES, ids=lambda v: v if isinstance(v, str) else type(v).__name__)
def test_every_report_is_read_back_as_it_was_written(job: str, report: p.Report) -> None:
    line = json.dumps(p.wire(report))
    assert p.read(job, json.loads(line)) == report


def test_every_kind_of_report_has_a_sample_and_one_record_per_kind_and_job() -> None:
    kinds = {kind for job in p.jobs() for kind in p.report_kinds(job).values()}
    assert kinds == {type(report) for _, report in SAMPLES}
    assert len({kind.event for kind in kinds}) == len(kinds) - 1  # "trial": the reference's and the candidate's


def test_the_wire_is_what_the_senders_wrote_before_the_records() -> None:
    assert set(p.wire(CANDIDATE_TRIAL)) == {
        "event", "index", "kind", "output_types", "outputs", "container", "mutated_inputs", "aliased_outputs",
        "late_writes", "triton_launches", "extension_calls", "own_calls", "own_device_kernels", "device_kernels",
        "wall_s", "checks"}  # checks: which of the harness's checks ran on this call (issue 41)
    timing = p.wire(TIMING)
    assert timing["event"] == "timing" and timing["timed_trials"] == [0, 1]
    assert timing["measurement"]["iqr_ms"] == pytest.approx(0.1)  # Measurement.to_json's derived field, as before
    assert j.Measurement.from_json(timing["measurement"]) == MEASUREMENT
    assert p.wire(p.Done()) == {"event": "done"}


def _with(message: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {k: v for k, v in {**message, **changes}.items() if v is not _DROP}


_DROP = object()
TRIAL = p.wire(CANDIDATE_TRIAL)
TIMING_MESSAGE = p.wire(TIMING)


@pytest.mark.parametrize(("message", "why"), [
    (_with(TRIAL, index=_DROP), "'trial' message from the child: index: missing"),
    (_with(TRIAL, index="0"), "index: '0' is not int"),
    (_with(TRIAL, index=True), "index: True is not int"),
    (_with(TRIAL, own_calls=None), "own_calls: None is not int"),
    (_with(TRIAL, mutated_inputs="0"), "mutated_inputs: '0' is not tuple"),
    (_with(TRIAL, late_writes=[0, "x"]), "late_writes[1]: 'x' is not int"),
    (_with(TRIAL, triton_launches={"k": "many"}), "triton_launches.k: 'many' is not int"),
    (_with(TRIAL, verdict="passed"), "verdict: not a field of CandidateTrial"),
    (_with(TIMING_MESSAGE, measurement="fast"), "measurement: a str is not a Measurement object"),
    (_with(TIMING_MESSAGE, measurement={"median_ms": 0.1}), "measurement.min_ms: missing"),
    (_with(TIMING_MESSAGE, measurement={**TIMING_MESSAGE["measurement"], "median_ms": "0.1"}),
     "measurement.median_ms: '0.1' is not float"),
    (_with(TIMING_MESSAGE, timed_trials=None), "timed_trials: None is not tuple"),
    (_with(TIMING_MESSAGE, side_stream=0), "side_stream: 0 is not bool"),
    ({"event": "done", "status": "passed"}, "'done' message from the child: status: not a field of Done"),
    ({"event": "done", "event2": None}, "event2: not a field of Done"),
    ({"event": "tuned", "index": 0, "ok": True}, "the candidate job sends no 'tuned' message"),
    ({"event": "finding", "code": "x", "message": "y", "details": {"severity": "note"}},
     "details: 'severity' is a reserved name"),
    ({"event": "cuda_build", "name": "e", "arch": "sm_90a", "result": {"ok": "yes"}}, "result.ok: 'yes' is not bool"),
])
def test_a_message_that_is_not_its_record_is_a_protocol_error(message: dict[str, Any], why: str) -> None:
    with pytest.raises(p.ProtocolError, match=re.escape(why)):
        p.read("candidate", message)
    kept, errors = p.screen("candidate", [message, {"event": "done"}])
    assert kept == [{"event": "done"}] and len(errors) == 1 and why in errors[0]


def test_a_run_reads_records_and_passes_over_what_does_not_parse() -> None:
    """A ChildRun built from anything (run_child screens first; a test or a caller may not) never raises."""
    run = ChildRun(job="candidate", returncode=0, timed_out=False, wall_s=1.0, stderr_tail="", stdout_tail="",
                   messages=(TRIAL, _with(TRIAL, index=_DROP), {"event": "trial_start", "index": 1, "kind": "x"},
                             _with(TIMING_MESSAGE, measurement="fast"), {"event": "done"}))
    assert run.reports(j.CandidateTrial) == [CANDIDATE_TRIAL]
    assert run.report(j.TrialStart) == j.TrialStart(index=1, kind="x")
    assert run.report(j.TimingResult) is None and run.report(p.JobError) is None
    assert run.finished
    reference = ChildRun(job="reference", returncode=0, timed_out=False, wall_s=1.0, stderr_tail="",
                         stdout_tail="", messages=(TRIAL,))
    assert reference.reports(j.CandidateTrial) == []  # the reference's "trial" is its own record
    assert reference.reports(j.ReferenceTrial) == []  # and this one is not it


def test_specs_are_read_back_as_written_and_check_their_fields() -> None:
    timing = j.TimingSettings(min_reps=20, max_reps=2000, target_ms=600.0, warmup_ms=100.0)
    specs = [
        j.ReferenceSpec(problem="/p.py", device="cpu", init_seed=1, trials=(j.TrialSpec(index=0, kind="random", seed=5),),
                        shared_dir="/s", private_dir="/q", size_globals={"N": 8}),
        j.CandidateSpec(candidate="/c.py", device="cuda", init_seed=1, trials=(), shared_dir="/s", out_dir="/o",
                        watch_paths=("/p.py",), timing=timing, n_sets=2),
        j.BaselineSpec(problem="/p.py", device="cuda", init_seed=1, shared_dir="/s", input_sets=(0, 1), timing=timing),
        j.TuneSpec(problem="/p.py", device="cuda", seed=0, candidates=((0, "/a.py"), (1, "/b.py")), timing=timing),
        j.ProbeSpec(problem="/p.py", device="cpu"),
        j.ExportProbeSpec(reference="/p.py", variants=(j.ProbeVariant(id="v", path="/v.py", language="triton"),)),
        j.SanitizeSpec(problem="/p.py", candidate="/c.py", device="cuda", seed=3, size_overrides={"N": 64}),
        j.ProfileSpec(problem="/p.py", candidate="/c.py", device="cuda", seed=3, size_overrides={"N": 64}),
    ]
    assert {type(s) for s in specs} == set(p.jobs().values()) == {m.__dict__[n] for m in j.MODULES for n in dir(m) if n.endswith("Spec") and n != "JobSpec" and m.__dict__[n].__module__ == m.__name__}
    for spec in specs:
        assert type(spec).from_json(json.loads(json.dumps(spec.to_json()))) == spec
        assert type(spec).from_json(spec) is spec
    assert j.TuneSpec.from_json(specs[3].to_json()).candidates == ((0, "/a.py"), (1, "/b.py"))
    with pytest.raises(p.ProtocolError, match=re.escape("candidates[0]: a list is not tuple[int, str]")):
        j.TuneSpec.from_json({**specs[3].to_json(), "candidates": [[0]]})
    with pytest.raises(p.ProtocolError, match="out_dir: missing"):
        j.CandidateSpec.from_json({k: v for k, v in specs[1].to_json().items() if k != "out_dir"})
    assert j.TimingSettings.from_config(target_ms=200.0).target_ms == 200.0
