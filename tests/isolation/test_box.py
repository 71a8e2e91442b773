"""The closed box around a job (isolation/box.py): every process a job starts ends with it and is reported; an
untrusted job sees the shared cache read-only and other jobs' folders not at all; the job holds no capability and
cannot reach its keeper. Both boxes are tested where the kernel allows them: the namespace one needs root or user
namespaces (CI and the GPU machine run as root), the subreaper one runs anywhere on Linux."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelwright.isolation import box
from kernelwright.isolation.process import _box_report

BOX = Path(box.__file__)


def _namespaces_allowed() -> bool:
    probe = subprocess.run(["unshare", "-Urp", "--fork", "true"], capture_output=True) if os.path.exists(
        "/usr/bin/unshare") else None
    return os.geteuid() == 0 or (probe is not None and probe.returncode == 0)


MODES = [pytest.param("namespace", marks=pytest.mark.skipif(not _namespaces_allowed(), reason="no namespaces here")),
         "subreaper"]


def _boxed(script: str, tmp_path: Path, **plan) -> tuple[int, dict]:
    read_fd, write_fd = os.pipe()
    plan = {"control_fd": write_fd, "memory_limit": 0, **plan}
    proc = subprocess.run([sys.executable, "-I", "-S", str(BOX), json.dumps(plan), "--", "sh", "-c", script],
                          pass_fds=(write_fd,), start_new_session=True, cwd=tmp_path, timeout=60)
    os.close(write_fd)
    return proc.returncode, _box_report(read_fd)


@pytest.mark.parametrize("mode", MODES)
def test_a_double_forked_setsid_helper_ends_with_the_job_and_is_reported(mode: str, tmp_path: Path) -> None:
    marker = tmp_path / "escaped"
    script = f"(setsid sh -c 'sleep 1.5; echo out > {marker}' &); sleep 0.3; exit 3"
    rc, report = _boxed(script, tmp_path, mode=mode)
    assert rc == 3 and report["box"] in ({"namespace", "user-namespace"} if mode == "namespace" else {"subreaper"})
    assert report["exit"] == 3
    assert any("sleep 1.5" in p["cmdline"] for p in report["leftovers"]), report
    time.sleep(2.5)
    assert not marker.exists()


@pytest.mark.parametrize("mode", MODES)
def test_the_job_holds_no_capability_and_its_signal_death_is_mirrored(mode: str, tmp_path: Path) -> None:
    rc, report = _boxed("grep -q '^CapEff:\t0000000000000000' /proc/self/status || exit 9; kill -SEGV $$",
                        tmp_path, mode=mode)
    assert rc == -11 and report["exit"] == -11 and report["leftovers"] == []


@pytest.mark.skipif(not _namespaces_allowed(), reason="no namespaces here")
def test_in_a_namespace_the_job_sees_only_its_box_and_cannot_end_its_keeper(tmp_path: Path) -> None:
    rc, report = _boxed("kill -9 1; kill -9 $PPID; ls /proc | grep -cE '^[0-9]+$' > count; exit 0", tmp_path,
                        mode="namespace")
    assert rc == 0 and report["exit"] == 0
    assert int((tmp_path / "count").read_text()) <= 5  # init, the shell, ls, grep (never the host's processes)


@pytest.mark.skipif(not _namespaces_allowed(), reason="no namespaces here")
def test_an_untrusted_view_shared_cache_read_only_other_folders_hidden(tmp_path: Path) -> None:
    cache, own, keys = tmp_path / "cache", tmp_path / "cache" / "own", tmp_path / "cache" / "keys"
    hidden, mine = tmp_path / "hidden", tmp_path / "hidden" / "mine"
    for d in (own, keys, mine, hidden / "other-verify"):
        d.mkdir(parents=True)
    (keys / "digest.key").write_text("secret")
    (cache / "decoys.json").write_text("trusted")
    (hidden / "other-verify" / "out-0.pt").write_text("someone else's")
    script = (f"echo x > {cache}/decoys.json || echo ro >> {mine}/log; echo y > {own}/f && echo own >> {mine}/log; "
              f"cat {keys}/digest.key 2>/dev/null || echo nokey >> {mine}/log; "
              f"ls {hidden}/other-verify 2>/dev/null || echo noother >> {mine}/log")
    rc, report = _boxed(script, tmp_path, mode="namespace", readonly=[str(cache)], hide=[str(hidden), str(keys)],
                        keep=[str(mine), str(own)])
    assert rc == 0 and report["notes"] == [], report
    assert (mine / "log").read_text().split() == ["ro", "own", "nokey", "noother"]
    assert (cache / "decoys.json").read_text() == "trusted" and (own / "f").read_text() == "y\n"
