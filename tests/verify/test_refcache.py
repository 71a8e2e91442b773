"""References reused across the verifies of one run: only where everything they depend on is the same, never
shared with a later candidate through files it could change, and bounded in memory."""

from pathlib import Path

import pytest

from kernelwright.config import config
from kernelwright.records import Status
from kernelwright.verify import refcache, verifier, workdir
from kernelwright.verify.records import VerifyOptions
from kernelwright.verify.verifier import verify

HERE = Path(__file__).parent
SOFTMAX = HERE / "problems" / "softmax.py"


@pytest.fixture(autouse=True)
def empty_cache():
    refcache.CACHE.clear()
    yield
    refcache.CACHE.clear()


def _codes(verdict):
    return {f.code for f in verdict.findings}


def test_the_second_verify_reuses_the_reference_and_a_candidate_cannot_poison_it(candidate, tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    honest = candidate("softmax_ok.py")
    # A candidate that rewrites every input file it can find on disk (the shared folder of its verify).
    poisoner = tmp_path / "softmax_poisons_inputs.py"
    poisoner.write_text(
        "import glob, torch\n"
        f"for _p in glob.glob({str(scratch)!r} + '/*/shared/inputs-*.pt'):\n"
        "    torch.save([torch.zeros(1)], _p)\n" + honest.read_text())
    options = VerifyOptions(device="cpu", seed=11, reuse_reference=True)
    with config.scope(scratch_dir=str(scratch)):
        first = verify(SOFTMAX, honest, options)
        # The next verify's workdir is ready, its candidate child started in it; the next verify takes both.
        warm = verifier._WARM._ready[1]
        assert warm.parent == scratch and (warm / "candidate-cwd").is_dir()
        second = verify(SOFTMAX, poisoner, options)
        assert not warm.exists() and verifier._WARM._ready[1] != warm
        third = verify(SOFTMAX, honest, options)
        other_seed = verify(SOFTMAX, honest, VerifyOptions(device="cpu", seed=12, reuse_reference=True))
    assert first.status == Status.PASSED and "reference-reused" not in _codes(first)
    assert second.status != Status.PASSED and "reference-reused" in _codes(second)
    assert third.status == Status.PASSED and "reference-reused" in _codes(third)
    assert [t.seed for t in third.trials] == [t.seed for t in first.trials]
    assert third.phases["reference"] < first.phases["reference"]
    assert other_seed.status == Status.PASSED and "reference-reused" not in _codes(other_seed)
    assert refcache.CACHE.hits == 2


# Without reuse_reference nothing is kept: tests/verify/test_verify_cpu.py's honest softmax checks it.


def test_the_key_is_everything_the_answers_depend_on_and_not_the_folders():
    spec = {"problem": "/p.py", "device": "cpu", "init_seed": 3, "trials": [{"index": 0}], "policy": "strict",
            "size_overrides": {}, "shared_dir": "/a/shared", "private_dir": "/a/private"}
    base = refcache.key_of("sha", spec, "2.13.0")
    assert refcache.key_of("sha", {**spec, "shared_dir": "/b/shared", "private_dir": "/b/p"}, "2.13.0") == base
    changed = [refcache.key_of("sha2", spec, "2.13.0"), refcache.key_of("sha", spec, "2.12.0")] + [
        refcache.key_of("sha", {**spec, field: value}, "2.13.0")
        for field, value in (("init_seed", 4), ("device", "cuda"), ("size_overrides", {"N": 7}),
                             ("trials", [{"index": 1}]), ("policy", "tf32"), ("problem", "/q.py"))]
    assert base not in changed and len(set(changed)) == len(changed)


def _entry(nbytes):
    return refcache.Entry(run=None, refs={}, ref_state={}, ref_state64={}, shared_files=(), nbytes=nbytes)


def test_entries_are_evicted_least_recently_used_within_the_budget():
    cache = refcache.ReferenceCache()
    gib = 1 << 30
    with config.scope(reference_cache_gb=2.0):
        assert cache.put("a", _entry(gib)) and cache.put("b", _entry(gib))
        assert cache.get("a") is not None  # a is now the most recent
        assert cache.put("c", _entry(gib))  # b goes
        assert cache.get("b") is None and cache.get("a") is not None and cache.get("c") is not None
        assert not cache.put("huge", _entry(3 * gib)) and cache.get("huge") is None
    with config.scope(reference_cache_gb=0):
        assert not cache.put("d", _entry(1))


def test_the_default_budget_is_split_between_processes_and_leaves_memory_available(monkeypatch):
    gib = 1 << 30
    monkeypatch.setattr(refcache, "physical_bytes", lambda: 128 * gib)
    cache = refcache.ReferenceCache()
    with config.scope(reference_cache_gb=-1.0):
        assert cache.capacity_bytes() == 32 * gib  # a quarter of the machine
        cache.sharers = 4  # a bench's four workers: each holds a cache of its own
        assert cache.capacity_bytes() == 8 * gib
        monkeypatch.setattr(refcache, "available_bytes", lambda: 100 * gib)
        assert cache.room_bytes() == 8 * gib
        monkeypatch.setattr(refcache, "available_bytes", lambda: 20 * gib)
        assert cache.room_bytes() == 4 * gib  # 16 GB (an eighth) stays available
        assert cache.put("a", _entry(3 * gib))
        assert cache.room_bytes() == 7 * gib  # what it holds could be evicted for a newer entry
        monkeypatch.setattr(refcache, "available_bytes", lambda: 10 * gib)
        assert cache.room_bytes() == 0
    with config.scope(reference_cache_gb=2.0):
        assert cache.capacity_bytes() == 2 * gib  # a budget the user set is not split


def test_an_entry_too_large_reads_no_file(tmp_path):
    (tmp_path / "inputs-0.pt").write_bytes(b"x" * 4096)
    assert refcache.make_entry(None, {}, {}, {}, tmp_path, capacity_bytes=1024) is None
    entry = refcache.make_entry(None, {}, {}, {}, tmp_path, capacity_bytes=1 << 20)
    assert entry.nbytes == 4096 and entry.shared_files[0][0] == "inputs-0.pt"


def test_a_warm_workdir_serves_one_verify_of_its_own_scratch_folder(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(workdir, "prestart_child", lambda job, *, workdir, device: started.append((job, device)))
    ended = []
    monkeypatch.setattr(workdir, "discard_prestarted", lambda workdir: ended.append(workdir))
    warm = workdir.WarmWorkdir()
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    warm.prepare(str(a), "cuda", timing=True)
    assert started == [("candidate", "cuda"), ("baseline", "cuda")]
    first = warm._ready[1]
    assert warm.take(str(a)) == first and warm.take(str(a)) is None  # one verify only
    warm.prepare(str(a), "cpu", timing=True)
    assert started[-1] == ("candidate", "cpu")  # no baseline child off the GPU
    other = warm._ready[1]
    assert warm.take(str(b)) is None and ended == [other] and not other.exists()  # another folder: dropped
    warm.prepare(str(a), "cpu", timing=False)
    replaced = warm._ready[1]
    warm.prepare(str(a), "cpu", timing=False)  # one at a time: the older one's children end
    assert ended[-1] == replaced and not replaced.exists()
    warm.close()
    assert warm._ready is None and len(list(a.iterdir())) == 1  # the first, taken: its verify removes it
