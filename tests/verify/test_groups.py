"""Trial groups (verify/groups.py): trials whose files cannot all fit the scratch space are checked a group at a
time, each special trial with the random trial it draws on, the first group's timed input sets kept throughout."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.config import config
from kernelwright.errors import InputError
from kernelwright.jobs import ScratchNeed
from kernelwright.records import Severity, Status
from kernelwright.verify import trials
from kernelwright.verify.findings import Judge
from kernelwright.verify.groups import GroupedChecking, _bytes, plan_groups, units
from kernelwright.verify.judging import TrialJudging
from kernelwright.verify.records import TrialOutcome, VerifyOptions
from kernelwright.verify.verifier import verify

HERE = Path(__file__).parent
SOFTMAX = HERE / "problems" / "softmax.py"
MB = 1 << 20


def _plan():
    return trials.plan_trials(100, 5)  # 5 random, rewrite, repoison, 2 sparse, scaled, heavy-tailed, shape


def _need(trial_mb: float, output_mb: float, room_mb: float) -> ScratchNeed:
    return ScratchNeed(trial_bytes=int(trial_mb * MB), output_bytes=int(output_mb * MB), room_bytes=int(room_mb * MB))


def test_each_special_trial_stays_with_the_trial_it_draws_on():
    plan = _plan()
    got = [[t.index for t in u] for u in units(plan)]
    by_kind = {t.kind: t.index for t in plan}
    assert got[0] == [0, by_kind["rewrite"]]
    assert got[1] == [1, by_kind["repoison"]]
    assert got[2] == [2, by_kind["sparse_in_place"]] and got[3] == [3, by_kind["sparse_copy"]]
    assert got[4] == [4]
    assert got[5:] == [[by_kind["scaled"]], [by_kind["heavy_tailed"]], [by_kind["shape"]]]
    assert sorted(i for u in got for i in u) == [t.index for t in plan]


@pytest.mark.parametrize("room_mb", [3.5, 4.2, 5.0, 9.0])
def test_groups_fit_the_room_and_cover_the_plan_once(room_mb):
    plan, need = _plan(), _need(1.0, 0.25, room_mb)
    groups = plan_groups(plan, need, timed_sets=4)
    indices = [t.index for g in groups.groups for t in g]
    assert sorted(indices) == [t.index for t in plan] and len(indices) == len(plan)
    first = groups.groups[0]
    assert first[0].index == 0 and any(t.kind == trials.REWRITE for t in first)
    assert groups.kept and groups.kept[0] == 0
    assert set(groups.kept) <= {t.index for t in first if t.kind == trials.RANDOM}
    assert _bytes(first, need) + len(groups.kept) * need.output_bytes <= need.room_bytes
    later_room = need.room_bytes - len(groups.kept) * need.trial_bytes
    for group in groups.groups[1:]:
        assert _bytes(group, need) <= later_room
        for t in group:  # whole units: a trial drawn on another runs in its source's job
            assert t.source is None or t.source in {u.index for u in group}
        assert [t.index for t in group] == sorted(t.index for t in group)  # the plan's order within a job
    assert len(groups.groups) > 1


def test_the_timed_sets_shrink_to_leave_room_for_the_largest_unit_beside_them():
    # Two trials' worth of room: trial 0's unit (rewrite included: 2 trials) fits with one timed set, and a
    # random unit with its special trial beside one kept trial does not: only a kept trial 0 leaves room for it.
    need = _need(1.0, 0.0, 3.0)
    groups = plan_groups(_plan(), need, timed_sets=4)
    assert groups.kept == (0,)


def test_a_problem_no_group_can_hold_gets_one_line_with_the_bytes():
    with pytest.raises(InputError) as caught:
        plan_groups(_plan(), _need(1024.0, 256.0, 1500.0), timed_sets=4)
    message = str(caught.value)
    assert "\n" not in message
    assert "1.0 GB a trial" in message and "room for 1.5 GB" in message and "KERNELWRIGHT_SCRATCH_DIR" in message


@pytest.fixture
def run(candidate, monkeypatch):
    def verify_in_groups(name: str, limit_gb: float = 0.0004, **options):
        # Room for about a third of softmax's trials' files (77 KB a trial) beside the candidate's cache.
        monkeypatch.setattr(config, "scratch_limit_gb", limit_gb)
        return verify(SOFTMAX, candidate(name), VerifyOptions(device="cpu", seed=7, **options))

    return verify_in_groups


def _groups(verdict):
    note = next(f for f in verdict.findings if f.code == "trial-groups")
    return note.details["groups"]


def test_an_honest_candidate_passes_every_trial_checked_in_groups(run):
    verdict = run("softmax_ok.py")
    assert verdict.status is Status.PASSED, verdict.message
    assert verdict.clean
    groups = _groups(verdict)
    assert len(groups) >= 3
    assert sorted(i for g in groups for i in g) == [t.index for t in verdict.trials]
    assert all(t.status == "ok" for t in verdict.trials), [(t.kind, t.status, t.note) for t in verdict.trials]
    assert [k.name for k in verdict.kernels if k.origin == "own"] == ["softmax_kernel"]


def test_a_candidate_wrong_only_in_a_later_group_fails_there(run, candidate, tmp_path):
    # Right at the problem's shape, wrong at any other: only the second-shape trial, in the last group, sees it.
    source = candidate("softmax_ok.py").read_text()
    body = "        return y"
    assert body in source
    wrong = source.replace(body, "        return y if x.shape[-1] == 300 else y * 1.5")
    path = tmp_path / "softmax_wrong_at_other_shapes.py"
    path.write_text(wrong)
    verdict = verify(SOFTMAX, path, VerifyOptions(device="cpu", seed=7))  # without groups: the reference verdict
    grouped = run(str(path))
    assert verdict.status is not Status.PASSED
    assert grouped.status is verdict.status, grouped.message
    shape = next(t for t in grouped.trials if t.kind == "shape")
    assert shape.status == "wrong"
    assert shape.index in _groups(grouped)[-1]
    assert {f.code for f in verdict.findings if f.severity is Severity.ERROR} == {
        f.code for f in grouped.findings if f.severity is Severity.ERROR}


def test_a_problem_that_cannot_fit_one_group_is_an_input_error_naming_the_bytes(run):
    with pytest.raises(InputError) as caught:
        run("softmax_ok.py", limit_gb=0.00005)  # 54 KB: not one trial's files
    assert "\n" not in str(caught.value) and "a trial" in str(caught.value)


class _Judging(TrialJudging, GroupedChecking):
    def __init__(self, out: Path) -> None:
        self.judge, self.out, self.judge_device = Judge(), out, "cpu"
        self.output_keys: dict[int, str] = {}
        self.answer_keys: dict[int, str] = {}
        self.expected_trials: list[int] = []


def test_a_replay_of_an_earlier_groups_output_is_caught_by_its_kept_digest(tmp_path):
    import torch

    from kernelwright.verify import tensors
    from kernelwright.verify.groups import answer_key

    plan = {t.index: t for t in _plan()}
    answer = torch.randn(64, 8)
    judging = _Judging(tmp_path)
    # Trial 1 ran in the first group: its output file is gone, its digests kept.
    tensors.save([answer], tmp_path / "out-1.pt")
    judging.expected_trials = [1]
    judging._remember_outputs({1: {"native": [answer]}})
    (tmp_path / "out-1.pt").unlink()
    judging.judge.outcomes[1] = TrialOutcome(index=1, kind="random", seed=101, status="ok")
    # Trial 4, in a later group, returned trial 1's output exactly where its own answer differs.
    tensors.save([answer.clone()], tmp_path / "out-4.pt")
    judging.expected_trials = [4]
    judging.judge.outcomes[4] = TrialOutcome(index=4, kind="random", seed=104, status="wrong")
    judging._replayed_outputs(plan, {4: {"native": [answer + 1]}})
    found = [f for f in judging.judge.findings if f.code == "output-caching"]
    assert found and found[0].details == {"trial": 4, "replayed": 1}
    assert judging.answer_keys[1] == answer_key({"native": [answer]})


def test_a_verify_that_needs_groups_first_waits_until_no_other_verifys_files_are_there(run, monkeypatch, tmp_path):
    """Its neighbours' files (a parallel bench's other problems) may be on their way: it plans against the room
    it has alone, waiting for them, and new verifies wait behind it."""
    import threading
    import time

    from kernelwright.deadline import Deadline
    from kernelwright.verify.scratch_share import ScratchShare

    monkeypatch.setattr(config, "scratch_dir", str(tmp_path))
    other = ScratchShare(str(tmp_path))
    assert other.share()

    def let_go_once_it_waits() -> None:
        while True:  # a new verify cannot start once it waits to be alone: then the other one ends
            probe = ScratchShare(str(tmp_path))
            try:
                if not probe.share(Deadline.after(1.05)):
                    break
            finally:
                probe.close()
            time.sleep(0.05)
        other.close()

    ender = threading.Thread(target=let_go_once_it_waits, daemon=True)
    ender.start()
    verdict = run("softmax_ok.py", deadline=Deadline.after(300))
    ender.join(30)
    assert verdict.status is Status.PASSED, verdict.message
    assert verdict.phases.get("scratch_wait", 0) > 0
    assert len(_groups(verdict)) >= 3  # measured again alone, and still too little room: groups


def test_later_groups_check_only_and_keep_the_first_groups_memory_figures(run, monkeypatch):
    """A later group's candidate job times, profiles and compiles nothing (the first group's did), and leaves as
    much device memory unpoisoned as the first (trial 0's outputs, which its own reference has not seen)."""
    from kernelwright.verify import verifier

    specs = []
    real = verifier.run_child

    def recording(job, spec, **kwargs):
        if job == "candidate":
            specs.append(spec)
        return real(job, spec, **kwargs)

    monkeypatch.setattr(verifier, "run_child", recording)
    monkeypatch.setattr(config, "cpu_instructions", True)
    verdict = run("softmax_ok.py")
    assert verdict.status is Status.PASSED, verdict.message
    groups = _groups(verdict)
    assert [[t.index for t in s.trials] for s in specs] == groups
    first, *later = specs
    assert first.expected_output_bytes > 0
    assert first.profile_trial in groups[0] and first.inspect_archs
    for spec in later:
        assert spec.expected_output_bytes == first.expected_output_bytes
        assert spec.profile_trial is None and spec.inspect_archs == () and spec.timing is None


def test_groups_also_fit_the_device_memory_a_candidates_job_may_fill():
    """The candidate's job keeps a device copy of every trial's inputs (an in-place trial's go into its source's)
    and copies the timed sets again: a group whose copies would not fit the device is split, though its files fit."""
    from kernelwright.verify.groups import _on_device

    plan = _plan()
    need = ScratchNeed(trial_bytes=MB, output_bytes=0, room_bytes=100 * MB, input_bytes=8 * MB,
                       device_room=8 * MB * 4)
    groups = plan_groups(plan, need, timed_sets=4)
    assert len(groups.groups) > 1  # the files would all fit in one
    first = groups.groups[0]
    assert _on_device([first], need, len(groups.kept))
    assert all(_on_device([g], need, 0) for g in groups.groups[1:])
    held = sum(1 for t in first if not t.in_place) + len(groups.kept)
    assert held <= 4
    with pytest.raises(InputError) as caught:
        plan_groups(plan, ScratchNeed(trial_bytes=MB, output_bytes=0, room_bytes=100 * MB, input_bytes=8 * MB,
                                      device_room=8 * MB), timed_sets=4)
    assert "on the device" in str(caught.value) and "\n" not in str(caught.value)


def test_the_reference_says_when_the_candidates_device_copies_cannot_fit():
    from kernelwright.verify import reference

    plan = _plan()
    assert reference._device_shortfall(MB, MB, plan, 4, 64 * MB) is None
    short = reference._device_shortfall(1 << 30, 1 << 30, plan, 4, 8 << 30)
    assert short is not None and "on the device" in short[0] and short[1] == 8 << 30
    holding = sum(1 for t in plan if not t.in_place) + 4
    assert f"{holding} copies" in short[0]
