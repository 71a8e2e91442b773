"""The reference job — runs in its own child, never in the candidate's (protocol rule 2; integrity #15).

It imports the problem, builds ``Model`` under the recorded seed, makes every trial's inputs (on the device the
verify runs on: ``get_inputs()`` under ``torch.device``, falling back to the CPU, where KernelBench makes them, for
a ``get_inputs`` that cannot) and computes the answers twice: in the problem's native precision on the device, and in float64.
Inputs and the model's state go to the shared directory the candidate reads; the answers go to a private directory
that the parent reads and deletes before the candidate starts.
"""

from __future__ import annotations

import contextlib
import copy
import os
from pathlib import Path
from typing import Any

import torch

from kernelwright.hardware import gpu_lock
from kernelwright.isolation.child import Channel, JobFailure
from kernelwright.isolation.protocol import Note
from kernelwright.jobs import (
    DeviceFacts,
    ReferenceKernels,
    ReferenceSpec,
    ReferenceTrial,
    ScratchNeed,
    Semantics,
    Work,
)
from kernelwright.problem import sizes
from kernelwright.problem.files import import_from_path
from kernelwright.verify import compare, roofline, runtime, sparse, tensors, trials
from kernelwright.verify.inputs import PROBLEM_MODULE, make_init_inputs, make_inputs, problem_failure

SCALE_FACTORS = (64.0, 8.0)
HEAVY_TAIL_SIGMA = (1.0, 0.5)


class _Outputs(list):
    """A forward's flat outputs, remembering the container they came in."""

    container = "tensor"


def _run(model: torch.nn.Module, inputs: list[Any], device: torch.device, seed: int | None = None
         ) -> list[torch.Tensor]:
    """One forward; ``seed`` (trials.forward_seed) set on the global generator first where the trial's draws must
    be the candidate's."""
    dev_inputs = tensors.to_device(inputs, device)
    if seed is not None:
        torch.manual_seed(seed)
    with torch.no_grad():
        result = model(*dev_inputs)
    outputs = _Outputs(tensors.flatten_outputs(result))
    outputs.container = tensors.container_of(result)
    for i, out in enumerate(outputs):
        if not isinstance(out, torch.Tensor):
            raise JobFailure("problem_error", "problem-error",
                             f"the problem's Model.forward returned a {type(out).__name__} as output {i}; "
                             "KernelBench problems return tensors")
    runtime.synchronize(device)
    return outputs


def _to64(values: list[Any]) -> list[Any]:
    return [v.to(torch.float64) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


def _all_finite(outputs: list[torch.Tensor] | None) -> bool:
    if outputs is None:
        return True
    return all(bool(torch.isfinite(o).all()) if o.is_floating_point() else True for o in outputs)


def _generators(seed: int) -> Any:
    """A seeded generator per device, made when first asked for (noise is drawn where the tensor lives)."""
    made: dict[torch.device, torch.Generator] = {}

    def on(device: torch.device) -> torch.Generator:
        if device not in made:
            made[device] = torch.Generator(device=device).manual_seed(seed)
        return made[device]

    return on


def _transform(values: list[Any], kind: str, seed: int, level: int) -> tuple[list[Any], str]:
    gen = _generators(seed ^ 0x5EED)
    out = []
    for v in values:
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            if kind == trials.SCALED:
                v = v * SCALE_FACTORS[level]
            else:
                noise = torch.randn(v.shape, generator=gen(v.device), dtype=torch.float32,
                                    device=v.device) * HEAVY_TAIL_SIGMA[level]
                v = (v.to(torch.float32) * torch.exp(noise)).to(v.dtype)
        out.append(v)
    label = f"x{SCALE_FACTORS[level]:g}" if kind == trials.SCALED else f"x exp(N(0,{HEAVY_TAIL_SIGMA[level]}^2))"
    return out, label


def _same_init(a: list[Any], b: list[Any]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.shape == y.shape):
                return False
        elif x != y:
            return False
    return True


def _shapes(values: list[Any]) -> list[Any]:
    return [tuple(v.shape) if isinstance(v, torch.Tensor) else v for v in values]


def _second_shape(module: Any, size_globals: dict[str, int], init_seed: int, seed: int) -> dict[str, int]:
    """Size globals that can change without changing the model's constructor arguments (so its weights stay
    valid) and that do change the inputs' shapes: {name: new value}."""
    base_init = make_init_inputs(module, init_seed)
    base_shapes = _shapes(make_inputs(module, seed, "meta"))
    chosen: dict[str, int] = {}
    for name, value in size_globals.items():
        if value < 2 or not isinstance(getattr(module, name, None), int):
            continue
        new = value - max(1, value // 8)
        if new % 2 == 0 and new > 1:
            new -= 1  # an odd size breaks power-of-two and divisibility assumptions
        setattr(module, name, new)
        try:
            ok = _same_init(make_init_inputs(module, init_seed), base_init) and _shapes(
                make_inputs(module, seed, "meta")) != base_shapes
        except JobFailure:
            ok = False
        finally:
            setattr(module, name, value)
        if ok:
            chosen[name] = new
    return chosen


def _ignored_inputs(model: torch.nn.Module, inputs: list[Any], outputs: list[torch.Tensor],
                    device: torch.device, seed: int | None = None) -> list[int]:
    """Inputs whose values do not change the output (left out of the minimum bytes)."""
    ignored = []
    gen = _generators(1234)
    for i, v in enumerate(inputs):
        if not isinstance(v, torch.Tensor) or v.numel() == 0:
            continue
        if v.is_floating_point():
            other = (torch.randn(v.shape, generator=gen(v.device), device=v.device) * (v.float().std() + 1) + 3
                     ).to(v.dtype)
        elif v.dtype == torch.bool:
            other = ~v
        else:
            lo, hi = int(v.min()), int(v.max())
            other = torch.randint(lo, hi + 1, v.shape, generator=gen(v.device), dtype=v.dtype,
                                  device=v.device) if hi > lo else v + 1
        changed = list(inputs)
        changed[i] = other
        try:
            new = _run(model, changed, device, seed)  # the first trial's draws, if the forward makes any
        except Exception:
            continue  # the perturbed input was not valid (e.g. an index out of range): assume it is read
        if all(torch.equal(a, b) for a, b in zip(new, outputs)):
            ignored.append(i)
    return ignored


SCRATCH_MARGIN = 1 << 30  # left free on the scratch file system, for the candidate's own files


def _nbytes(values: Any) -> int:
    return sum(v.numel() * v.element_size() for v in values or () if isinstance(v, torch.Tensor))


def _in_memory(path: Path) -> bool:
    """Whether ``path`` lies on a file system held in memory (tmpfs, ramfs: /dev/shm), from /proc/mounts."""
    try:
        target = os.path.realpath(path)
        best, fstype = "", ""
        with open("/proc/mounts") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) < 3:
                    continue
                mount = fields[1].replace("\\040", " ")
                inside = target == mount or target.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best):
                    best, fstype = mount, fields[2]
        return fstype in ("tmpfs", "ramfs")
    except OSError:
        return False


def _free_bytes(path: Path) -> int:
    """Room for files under ``path``. A tmpfs's own free space counts memory the processes need too (its size is
    often all of it): there, what the kernel says is available, less an eighth of the machine for the jobs."""
    from kernelwright.verify.refcache import available_bytes, physical_bytes

    stat = os.statvfs(path)
    free = stat.f_bavail * stat.f_frsize
    if _in_memory(path):
        free = min(free, max(0, available_bytes() - physical_bytes() // 8))
    return free


def _used_bytes(folder: Path) -> int:
    """The bytes of every file under ``folder`` (a verify's folder: a few dozen files)."""
    total = 0
    for root, _, names in os.walk(folder):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _room(directory: Path, limit: int = 0, held: int = 0) -> tuple[int, str]:
    """Room for more files in ``directory`` and what bounds it: its file system's free space (:func:`_free_bytes`)
    less the margin kept for the candidate's own files, and under a limit on the verify's folder (its parent) what
    the limit leaves beside the files there and the ``held`` bytes of earlier groups' files the parent still maps."""
    free = _free_bytes(directory) - SCRATCH_MARGIN
    where = " (memory: a tmpfs)" if _in_memory(directory) else ""
    if limit:
        left = limit - held - _used_bytes(directory.parent)
        if left < free:
            free, where = left, f" under scratch_limit_gb {limit / (1 << 30):g}"
    return max(0, free), where


def _scratch_shortfall(per_trial: dict[Path, int], trials_left: int, later: dict[Path, int] | None = None, *,
                       limit: int = 0, held: int = 0) -> tuple[str, int] | None:
    """Where the remaining trials' files cannot fit their file system (a full tmpfs, /dev/shm, is memory, and filling
    it gets the whole verify killed by the OOM killer with no message: a level-1 problem with a 7.5 GB input needs
    ~300 GB for its ten trials): the one-line message and the room there is, else None. ``per_trial``: bytes one
    trial writes into each folder; ``later``: bytes written there after this job, beside all of them (the
    candidate's output files, one a checked call and one a timed input set, in the verify's folder beside the shared
    one); ``limit``/``held``: :func:`_room`'s."""
    later = later or {}
    by_fs: dict[int, tuple[Path, int, int]] = {}
    for directory in {**per_trial, **later}:  # one file system unless a mount splits the folders
        fs = os.stat(directory).st_dev
        first, total, after = by_fs.get(fs, (directory, 0, 0))
        by_fs[fs] = (first, total + per_trial.get(directory, 0), after + later.get(directory, 0))
    gib = 1 << 30
    for directory, nbytes, after in by_fs.values():
        wanted = nbytes * trials_left + after
        room, where = _room(directory, limit, held)
        if wanted > room:
            outputs = f" and ~{after / gib:.1f} GB for the candidate's outputs" if after else ""
            return (f"the reference's {trials_left} remaining trial(s){outputs} need ~{wanted / gib:.1f} GB of scratch "
                    f"files ({nbytes / gib:.1f} GB a trial: inputs and the native and float64 answers) and "
                    f"{directory.parent} has room for {room / gib:.1f} GB{where}; set scratch_dir "
                    "(KERNELWRIGHT_SCRATCH_DIR) to a larger disk or shrink the problem (--size NAME=VALUE)", room)
    return None


DEVICE_SHARE = 0.8  # of the device's memory, what a candidate's job may fill with trial inputs and outputs


def _device_room(model: torch.nn.Module, device: torch.device) -> int:
    """The device memory a candidate's job may fill with its trials' inputs and outputs: a share of the card less
    the model's weights (0 off a GPU: no bound here)."""
    if device.type != "cuda":
        return 0
    total = torch.cuda.get_device_properties(device).total_memory
    weights = _nbytes(list(model.parameters())) + _nbytes(list(model.buffers()))
    return max(1, int(total * DEVICE_SHARE) - weights)


def _device_shortfall(input_bytes: int, output_bytes: int, left: list[trials.TrialSpec], timed_sets: int,
                      room: int) -> tuple[str, int] | None:
    """Where the candidate's job could not hold its trials on the device: it keeps a copy of every trial's inputs
    (an in-place trial's go into its source's) until its trials end, then copies the timed sets again; the
    one-line message and the room, else None."""
    holding = sum(1 for t in left if not t.in_place) + timed_sets
    wanted = holding * input_bytes + 2 * output_bytes
    if wanted <= room:
        return None
    gib = 1 << 30
    return (f"the candidate's job would hold ~{wanted / gib:.1f} GB of trial inputs on the device ({holding} copies of "
            f"{input_bytes / gib:.1f} GB) and may use {room / gib:.1f} GB of it; shrink the problem (--size NAME=VALUE)",
            room)


def _check_scratch(per_trial: dict[Path, int], trials_left: int, later: dict[Path, int] | None = None, *,
                   limit: int = 0, held: int = 0) -> None:
    """:func:`_scratch_shortfall` as a one-line ``scratch-space`` error, raised before anything is written."""
    short = _scratch_shortfall(per_trial, trials_left, later, limit=limit, held=held)
    if short:
        raise JobFailure("runtime_error", "scratch-space", short[0])


def run_reference_job(spec: ReferenceSpec, channel: Channel) -> None:
    runtime.quiet_warnings()
    device = runtime.device_of(spec.device)
    runtime.configure_precision(spec.policy)
    shared, private = Path(spec.shared_dir), Path(spec.private_dir)
    init_seed = spec.init_seed
    channel.send(DeviceFacts(facts=runtime.device_facts(device)))

    try:
        module = import_from_path(spec.problem, PROBLEM_MODULE)
    except Exception as exc:
        raise problem_failure("importing the problem", exc) from exc
    if not isinstance(getattr(module, "Model", None), type):
        raise JobFailure("problem_error", "problem-error", "the problem defines no class Model")
    sizes.apply(module, spec.size_overrides)

    init_inputs = make_init_inputs(module, init_seed)
    torch.manual_seed(init_seed)
    try:
        model = module.Model(*init_inputs)
    except Exception as exc:
        raise problem_failure("the problem's Model(*get_init_inputs())", exc) from exc
    model = model.to(device)
    tensors.save(init_inputs, shared / "init.pt")
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, shared / "state.pt")

    answers = _Answers(model, device)

    plan = list(spec.trials)
    base_finite = True
    shape_change: dict[str, int] = {}
    if any(t.kind == trials.SHAPE for t in plan):
        shape_seed = spec.shape_seed if spec.shape_seed is not None else plan[0].seed
        shape_change = _second_shape(module, dict(spec.size_globals), init_seed, shape_seed)
    first_inputs: list[Any] | None = None
    first_outputs: list[torch.Tensor] | None = None
    seeds = {t.index: t.seed for t in plan}
    sparse_sources = {t.source for t in plan if t.kind in trials.SPARSE}
    kept: dict[int, list[torch.Tensor]] = {}  # the answers of the sparse trials' sources (host copies)

    first_own = next((t for t in plan if t.needs_own_reference), None)
    device_room = _device_room(model, device)
    for trial in plan:
        gpu_lock.give_way()  # a waiting measurement goes before the next trial's reference
        if not trial.needs_own_reference:
            channel.send(ReferenceTrial(index=trial.index, kind=trial.kind, source=trial.source))
            continue
        if trial.kind == trials.SHAPE and not shape_change:
            channel.send(ReferenceTrial(index=trial.index, kind=trial.kind,
                                        skipped="no size global can change without changing the model's constructor"))
            continue
        if trial.kind in trials.SPARSE:
            if trial.source not in kept:
                channel.send(ReferenceTrial(index=trial.index, kind=trial.kind,
                                            skipped="its source trial was skipped"))
                continue
            answer = _sparse_answer(answers, module, trial, seeds[trial.source], device, kept[trial.source])
        else:
            inputs, note = _inputs_for(module, trial, shape_change, device)
            before = _buffers(model) if trial.index == 0 else {}
            answer = answers.run(trial, inputs, note, base_finite)
            if trial.index == 0:
                _save_state_change(model, before, private / trials.STATE_FILE, answers.model64)
        native, ref64, inputs, note, skipped = answer
        if skipped or native is None:
            channel.send(ReferenceTrial(index=trial.index, kind=trial.kind, skipped=skipped or "no reference"))
            continue
        if trial.kind == trials.RANDOM:
            base_finite = base_finite and _all_finite(native)
        if trial.index == 0:
            first_inputs, first_outputs = inputs, native
        per_trial = {shared: _nbytes(inputs), private: _nbytes(native) + _nbytes(ref64)}
        left = plan[plan.index(trial):]
        short = _scratch_shortfall(per_trial, sum(1 for t in left if t.needs_own_reference),
                                   {shared: _nbytes(native) * spec.candidate_outputs},
                                   limit=spec.scratch_limit, held=spec.held_bytes)
        on_device = None
        if not short and trial is first_own and device_room:
            on_device = _device_shortfall(_nbytes(inputs), _nbytes(native), left, spec.timed_sets, device_room)
        if short or on_device:  # the parent may check the trials in groups that fit (verify/groups.py)
            room = short[1] if short else _room(shared, spec.scratch_limit, spec.held_bytes)[0]
            channel.send(ScratchNeed(trial_bytes=sum(per_trial.values()), output_bytes=_nbytes(native),
                                     room_bytes=room, input_bytes=_nbytes(inputs), device_room=device_room))
            if short:
                raise JobFailure("runtime_error", "scratch-space", short[0])
            raise JobFailure("runtime_error", "device-memory", on_device[0] if on_device else "")
        host = {"inputs": [v.detach().cpu() if isinstance(v, torch.Tensor) else v for v in inputs],
                "native": [o.detach().cpu() for o in native],
                "fp64": [o.detach().cpu() for o in ref64] if ref64 is not None else None}
        with gpu_lock.idle():  # writing to disk needs no device: a waiting measurement may run meanwhile
            tensors.save(host["inputs"], shared / f"inputs-{trial.index}.pt")
            torch.save({"native": host["native"], "fp64": host["fp64"]}, private / f"ref-{trial.index}.pt")
        if trial.index in sparse_sources:
            kept[trial.index] = host["native"]
        del host
        device_inputs = [v for v in inputs if isinstance(v, torch.Tensor)]
        channel.send(ReferenceTrial(
            index=trial.index,
            kind=trial.kind,
            seed=trial.seed,
            note=note,
            inputs=tuple(tensors.describe(v) if isinstance(v, torch.Tensor) else repr(v) for v in inputs),
            outputs=tuple(tensors.describe(o) for o in native),
            container=getattr(native, "container", None),
            finite=_all_finite(native),
            fp64=ref64 is not None,
            n_tensor_inputs=len(device_inputs),
        ))

    if answers.fp64_note:
        channel.send(Note(code="no-fp64-reference", message=answers.fp64_note))

    if spec.count_work and first_inputs is not None and first_outputs is not None:
        ignored = _ignored_inputs(model, first_inputs, first_outputs, device, trials.forward_seed(plan[0].seed))
        dev_inputs = tensors.to_device(first_inputs, device)
        try:
            work = roofline.count_work(model, dev_inputs, first_outputs, ignored)
            channel.send(Work(work=work))
        except Exception as exc:  # the counter is best effort; the verdict says the roofline is unknown
            channel.send(Note(code="work-count-failed",
                              message=f"counting FLOPs/bytes failed: {type(exc).__name__}: {exc}"))
    if first_inputs is not None:
        _report_reference_kernels(model, first_inputs, device, channel)
    if spec.aliasing and first_inputs is not None:
        dev_inputs = tensors.to_device(first_inputs, device)
        outs = _run(model, dev_inputs, device)
        aliased = sorted({j for j, o in enumerate(outs) for v in dev_inputs
                          if isinstance(v, torch.Tensor) and tensors.overlaps(o, v)})
        mutated = any(isinstance(v, torch.Tensor) and not torch.equal(v, w.to(v.device))
                      for v, w in zip(dev_inputs, first_inputs) if isinstance(w, torch.Tensor))
        channel.send(Semantics(outputs_alias_inputs=tuple(aliased), mutates_inputs=bool(mutated)))


def _buffers(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: b.detach().to("cpu", copy=True) for name, b in model.named_buffers()}


def _save_state_change(model: torch.nn.Module, before: dict[str, torch.Tensor], path: Path,
                       model64: torch.nn.Module | None = None) -> None:
    """What the first trial's forward did to the module's buffers (a training-mode batch norm's running statistics
    and batch count): the changed buffers' values after it, for the parent to compare the candidate's with, and the
    same buffers of the float64 model after the same forward (the state's own float64 reference, so that the judge
    measures PyTorch's error in them as it does in outputs: deep in a network the batch statistics carry every
    layer's rounding before them). Nothing is written when no buffer changed."""
    after = _buffers(model)
    changed = {name: value for name, value in after.items()
               if name not in before or before[name].shape != value.shape or not torch.equal(before[name], value)}
    if not changed:
        return
    fp64 = None
    if model64 is not None:
        theirs = dict(model64.named_buffers())
        fp64 = {name: theirs[name].detach().to("cpu", copy=True) for name, value in changed.items()
                if value.is_floating_point() and name in theirs and theirs[name].shape == value.shape}
    with gpu_lock.idle():
        torch.save({"native": changed, "fp64": fp64}, path)


def _inputs_for(module: Any, trial: trials.TrialSpec, shape_change: dict[str, int],
                device: torch.device) -> tuple[list[Any], str]:
    """A trial's inputs (at the second shape for the shape trial) and the note that says how they were made."""
    if trial.kind != trials.SHAPE:
        return make_inputs(module, trial.seed, device), ""
    saved = {name: getattr(module, name) for name in shape_change}
    for name, value in shape_change.items():
        setattr(module, name, value)
    try:
        inputs = make_inputs(module, trial.seed, device)
    finally:
        for name, value in saved.items():
            setattr(module, name, value)
    return inputs, ", ".join(f"{n} {saved[n]}->{v}" for n, v in shape_change.items())


def _sparse_answer(answers: _Answers, module: Any, trial: trials.TrialSpec, source_seed: int, device: torch.device,
                   earlier: list[torch.Tensor]) -> tuple[Any, Any, list[Any], str, str | None]:
    """A sparse trial's answer, as :meth:`_Answers.run` gives one: the source trial's inputs, made again from its
    seed, with a few elements changed at the first level of :mod:`sparse` whose answer the source's (``earlier``)
    would fail and that stays finite where that one is — a change the answer does not see catches no cache."""
    source = make_inputs(module, source_seed, device)
    skipped = "no input element can change within the input's own values"
    for level in range(len(sparse.LEVELS)):
        inputs, note = sparse.sparse_change(source, trial.seed, level)
        if not note:
            continue
        native, ref64, inputs, note, skipped = answers.run(trial, inputs, note, True)
        if skipped or native is None:
            return native, ref64, inputs, note, skipped
        if _all_finite(earlier) and not _all_finite(native):
            skipped = "the reference is not finite on the changed inputs: they leave the problem's domain"
        elif _stale_would_pass(earlier, native, ref64, device):
            skipped = "the answer does not change beyond the tolerance when a few elements of the inputs do"
        else:
            return native, ref64, inputs, note, None
    return None, None, [], "", skipped


def _stale_would_pass(earlier: list[torch.Tensor], native: list[torch.Tensor], ref64: list[torch.Tensor] | None,
                      device: torch.device) -> bool:
    """Whether the source trial's answer (``earlier``) would be judged right for these inputs, under the default
    tolerance (verify/compare.py): then the change is one the answer does not see (a swap within the rows a sum over
    them reads, moving only its rounding), and a cache serving the old answer would pass."""
    if len(earlier) != len(native):
        return False
    for j, (old, new) in enumerate(zip(earlier, native)):
        if old.shape != new.shape or old.dtype != new.dtype:
            return False
        if not compare.compare(old, new, ref64[j] if ref64 is not None else None, device=device.type).ok:
            return False
    return True


class _Answers:
    """The reference's answers for a trial: PyTorch's own (native precision) and float64's, while the model can
    be run in float64 at all (the first failure says why not, once)."""

    def __init__(self, model: torch.nn.Module, device: torch.device) -> None:
        self.model, self.device = model, device
        self.model64: torch.nn.Module | None = None
        self.fp64_note: str | None = None
        try:
            self.model64 = copy.deepcopy(model).to(torch.float64)
        except Exception as exc:
            self.fp64_note = f"the model cannot be converted to float64 ({type(exc).__name__}: {exc})"

    def run(self, trial: trials.TrialSpec, inputs: list[Any], note: str,
            base_finite: bool) -> tuple[Any, Any, list[Any], str, str | None]:
        """(native, float64 or None, the inputs used, the note, why the trial is skipped or None). A scaled or
        heavy-tailed trial tries milder transforms until the reference stays finite."""
        attempts = 1 if trial.kind not in (trials.SCALED, trials.HEAVY_TAILED) else len(SCALE_FACTORS)
        native = ref64 = None
        skipped = None
        for level in range(attempts):
            trial_inputs = inputs
            if trial.kind in (trials.SCALED, trials.HEAVY_TAILED):
                if not base_finite:
                    skipped = "the reference is not finite on the ordinary inputs"
                    break
                trial_inputs, note = _transform(inputs, trial.kind, trial.seed, level)
            seed = trials.forward_seed(trial.seed)
            try:
                native = _run(self.model, trial_inputs, self.device, seed)
            except JobFailure:
                raise
            except Exception as exc:
                if trial.kind == trials.RANDOM and trial.index == 0:
                    raise problem_failure("the problem's Model.forward", exc) from exc
                skipped = f"the reference fails on these inputs ({type(exc).__name__})"
                break
            if self.model64 is not None:
                try:
                    ref64 = _run(self.model64, _to64(trial_inputs), self.device, seed)
                except Exception as exc:
                    self.model64, ref64 = None, None
                    self.fp64_note = f"the model does not run in float64 ({type(exc).__name__}: {str(exc)[:160]})"
            if trial.kind in (trials.SCALED, trials.HEAVY_TAILED) and not (
                _all_finite(native) and _all_finite(ref64)
            ):
                skipped = "the reference overflows on transformed inputs"
                continue
            skipped = None
            inputs = trial_inputs
            break
        return native, ref64, inputs, note, skipped


def _report_reference_kernels(model: torch.nn.Module, inputs: list[Any], device: torch.device,
                              channel: Channel) -> None:
    """The kernels (GPU) or aten operators (CPU) one forward of the reference runs: a candidate whose library
    calls already run all of them is the reference in disguise."""
    from kernelwright.verify.child import launches

    dev_inputs = tensors.to_device(inputs, device)
    try:
        if device.type == "cuda":
            _run(model, dev_inputs, device)  # warm: no lazy initialisation kernels in the list
            names = sorted({name for name, _, _ in launches.profile_cuda_kernels(lambda: _run(model, dev_inputs,
                                                                                          device))})
            method = "profiler"
        else:
            recorder = launches.AtenRecorder(launches.LaunchRecorder())
            with recorder:
                _run(model, dev_inputs, device)
            names, method = sorted(recorder.ops), "aten-dispatch"
    except Exception as exc:
        channel.send(Note(code="reference-kernels-unavailable",
                          message=f"could not list the reference's kernels: {type(exc).__name__}: {exc}"))
        return
    channel.send(ReferenceKernels(names=tuple(names), method=method))
