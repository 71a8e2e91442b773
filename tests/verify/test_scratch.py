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
    assert "~300.0 GB" in failure.message and "30.0 GB a trial" in failure.message and "64.0 GB free" in failure.message
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


def test_bytes_count_tensors_only():
    assert reference._nbytes([torch.zeros(4, dtype=torch.float64), 3, "x", torch.zeros(2, dtype=torch.float16)]) == 36
    assert reference._nbytes(None) == 0
