"""The reference job stops with a one-line error, before writing, where its trials' files cannot fit the scratch
file system (a full /dev/shm is memory: the OOM killer would end the verify with no message)."""

import pytest
import torch

from kernelwright.isolation.child import JobFailure
from kernelwright.verify import reference

GIB = 1 << 30


def _free(monkeypatch, gib):
    monkeypatch.setattr(reference, "_free_bytes", lambda path: int(gib * GIB))


def test_trials_that_cannot_fit_stop_with_the_sizes_and_the_fix(tmp_path, monkeypatch):
    shared, private = tmp_path / "shared", tmp_path / "private"
    shared.mkdir(), private.mkdir()
    _free(monkeypatch, 64)
    with pytest.raises(JobFailure) as caught:
        reference._check_scratch({shared: int(7.5 * GIB), private: int(22.5 * GIB)}, trials_left=10)
    failure = caught.value
    assert failure.code == "scratch-space" and failure.status == "runtime_error"
    assert "\n" not in failure.message
    assert "~300.0 GB" in failure.message and "30.0 GB a trial" in failure.message and "room for 63.0 GB" in failure.message  # 64 free less the margin
    assert "KERNELWRIGHT_SCRATCH_DIR" in failure.message and "--size" in failure.message


def test_trials_that_fit_pass_and_the_margin_is_kept(tmp_path, monkeypatch):
    _free(monkeypatch, 64)
    reference._check_scratch({tmp_path: 6 * GIB}, trials_left=10)  # 60 GB of 64
    with pytest.raises(JobFailure):
        reference._check_scratch({tmp_path: int(6.35 * GIB)}, trials_left=10)  # 63.5: inside the 1 GiB margin


def test_folders_on_one_file_system_add_up(tmp_path, monkeypatch):
    shared, private = tmp_path / "shared", tmp_path / "private"
    shared.mkdir(), private.mkdir()
    _free(monkeypatch, 8.5)
    reference._check_scratch({shared: 3 * GIB}, trials_left=2)
    with pytest.raises(JobFailure):
        reference._check_scratch({shared: 2 * GIB, private: 2 * GIB}, trials_left=2)


def test_the_candidates_output_files_count_once_beside_every_trial(tmp_path, monkeypatch):
    """A checked call's outputs and a timed set's land in the same verify folder while the reference's files are
    all there: 10 trials of 2 GB fit 24 GB, not with 16 output files of 0.5 GB besides."""
    shared, private = tmp_path / "shared", tmp_path / "private"
    shared.mkdir(), private.mkdir()
    _free(monkeypatch, 24)
    reference._check_scratch({shared: GIB, private: GIB}, trials_left=10, later={shared: 0})
    with pytest.raises(JobFailure) as caught:
        reference._check_scratch({shared: GIB, private: GIB}, trials_left=10, later={shared: 8 * GIB})
    assert "~8.0 GB for the candidate's outputs" in caught.value.message and "~28.0 GB" in caught.value.message


def test_bytes_count_tensors_only():
    assert reference._nbytes([torch.zeros(4, dtype=torch.float64), 3, "x", torch.zeros(2, dtype=torch.float16)]) == 36
    assert reference._nbytes(None) == 0


def test_a_tmpfs_counts_only_the_memory_the_jobs_leave(tmp_path, monkeypatch):
    from kernelwright.verify import refcache

    # /dev/shm's own free space is often all of the memory; the processes need some of it too.
    monkeypatch.setattr(reference, "_in_memory", lambda path: True)
    monkeypatch.setattr(refcache, "physical_bytes", lambda: 128 * GIB)
    monkeypatch.setattr(refcache, "available_bytes", lambda: 40 * GIB)
    import os

    stat = os.statvfs(tmp_path)
    assert reference._free_bytes(tmp_path) == min(24 * GIB, stat.f_bavail * stat.f_frsize)  # 40 less 128 / 8
    with pytest.raises(JobFailure) as caught:
        reference._check_scratch({tmp_path: 3 * GIB}, trials_left=10)  # 30 GB: more than the memory leaves
    assert "(memory: a tmpfs)" in caught.value.message
    monkeypatch.setattr(reference, "_in_memory", lambda path: False)
    assert reference._free_bytes(tmp_path) > 0  # a disk: its own free space


def test_dev_shm_is_recognised_as_memory():
    import os

    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm here")
    with open("/proc/mounts") as fh:
        shm_is_tmpfs = any(line.split()[1:3] == ["/dev/shm", "tmpfs"] for line in fh)
    assert reference._in_memory("/dev/shm") == shm_is_tmpfs
    assert reference._in_memory("/proc") is False
