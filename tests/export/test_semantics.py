"""The op behaves as a PyTorch op must, whatever the reference does: writes to its arguments, outputs that alias each
other, train/eval-dependent layers, calls from several threads; bad names and failed exports leave nothing behind."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelwright.errors import InputError
from kernelwright.export.api import _move_into_place, export_package
from kernelwright.runtime.modules import load_module

from .conftest import SOFTMAX, import_package, unique_package, write_run

# a candidate's kernel: a copy through Triton, so every variant launches one @triton.jit kernel
KERNEL = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

def copy(y):
    z = torch.empty_like(y)
    _copy_kernel[(triton.cdiv(y.numel(), 256),)](y, z, y.numel(), BLOCK=256)
    return z
'''


def export(tmp_path: Path, problem: str, model: str, name: str) -> tuple[Any, Any, Path]:
    """Export ``problem`` with a ModelNew built from ``model`` (its forward's result copied through the kernel)."""
    file = tmp_path / f"{name}.py"
    file.write_text(problem)
    run = write_run(tmp_path / f"run_{name}", file, KERNEL + model)
    out = tmp_path / unique_package()
    result = export_package([run], out=out, name=name, isolate=False, trace=False)
    return import_package(out), getattr(getattr(torch.ops, result.namespace), name), out


BATCHNORM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm1d(c)

    def forward(self, x):
        return self.bn(x)

def get_inputs():
    return [torch.randn(8, 4)]

def get_init_inputs():
    return [4]
'''


def test_batch_norm_running_stats_are_not_written_by_the_op(tmp_path: Path) -> None:
    """BatchNorm in training mode writes its running stats (native_batch_norm's schema does not say so): the op,
    declared functional, works on copies; the module class runs the reference so the user's buffers update."""
    module, bn, out = export(tmp_path, BATCHNORM, '''
class ModelNew(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm1d(c)

    def forward(self, x):
        return copy(self.bn(x))
''', "bn")
    data = json.loads((out / "variants.json").read_text())
    assert {s["key"] for s in data["state"] if s.get("mutated")} == {
        "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}
    assert data["mode_dependent"] is True
    x = torch.randn(8, 4)
    state = [torch.randn(4), torch.randn(4), torch.zeros(4), torch.ones(4), torch.tensor(0)]
    before = [t.clone() for t in state]
    bn(x, *state)
    assert all(torch.equal(a, b) for a, b in zip(state, before))
    torch.library.opcheck(bn.default, (x, *state))
    # the module class does what Model does, in both modes
    original = load_module(f"{module.__name__}_original", out / "_reference.py").Model(4)
    mine = module.Bn(4)
    mine.load_state_dict(original.state_dict())
    torch.testing.assert_close(mine(x), original(x))
    torch.testing.assert_close(mine.bn.running_mean, original.bn.running_mean)
    torch.testing.assert_close(mine.eval()(x), original.eval()(x))


def test_an_input_written_in_place_is_left_alone(tmp_path: Path) -> None:
    module, relu, _ = export(tmp_path, '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu_(x) * 2

def get_inputs():
    return [torch.randn(8, 16)]
''', '''
class ModelNew(nn.Module):
    def forward(self, x):
        return copy(torch.relu(x) * 2)
''', "relu_twice")
    x = torch.randn(4, 16)
    before = x.clone()
    torch.testing.assert_close(relu(x), before.relu() * 2)
    assert torch.equal(x, before)
    torch.library.opcheck(relu.default, (torch.randn(4, 16),))


def test_outputs_that_alias_each_other_are_copied(tmp_path: Path) -> None:
    _, twice, _ = export(tmp_path, '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        y = x * 2
        return y, y.view(-1)

def get_inputs():
    return [torch.randn(8, 16)]
''', '''
class ModelNew(nn.Module):
    def forward(self, x):
        y = copy(x * 2)
        return y, y.view(-1)
''', "twice")
    a, b = twice(torch.randn(4, 16))
    assert a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr()
    torch.library.opcheck(twice.default, (torch.randn(4, 16, requires_grad=True),))


def test_dropout_follows_the_modules_eval_mode(tmp_path: Path) -> None:
    module, _, _ = export(tmp_path, '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(x) * 2

def get_inputs():
    return [torch.randn(8, 16)]
''', '''
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return copy(self.drop(x) * 2)
''', "drop")
    x = torch.ones(64, 16)
    torch.testing.assert_close(module.Drop().eval()(x), x * 2)
    assert bool((module.Drop()(x) == 0).any())  # training mode: the op, which drops


def test_concurrent_calls_use_their_own_parameters(tmp_path: Path) -> None:
    """functional_call swaps tensors into the cached instance: threads sharing one would see each other's."""
    _, power, _ = export(tmp_path, '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n))

    def forward(self, x):
        for _ in range(20):
            x = x * self.w
        return x

def get_inputs():
    return [torch.randn(8, 16)]

def get_init_inputs():
    return [16]
''', '''
class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n))

    def forward(self, x):
        for _ in range(20):
            x = x * self.w
        return copy(x)
''', "power")
    x = torch.ones(8, 16)
    failures: list[str] = []

    def work(value: float) -> None:
        w = torch.full((16,), value)
        try:
            for _ in range(200):
                y = power(x, w)
                if not torch.allclose(y, torch.full_like(y, value ** 20)):
                    failures.append(f"{value}: got {y.flatten()[0].item()}")
        except Exception as exc:  # noqa: BLE001 - a thread's failure is the finding
            failures.append(f"{value}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(v,)) for v in (1.0, 1.01, 1.02, 1.03)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:3]


@pytest.mark.parametrize("name", ["functools", "name"])
def test_op_names_that_would_be_shadowed_are_refused(make_run: Any, tmp_path: Path, name: str) -> None:
    out = tmp_path / unique_package()
    with pytest.raises(InputError, match=f"--name '{name}' clashes"):
        export_package([make_run(SOFTMAX)], out=out, name=name, isolate=False, trace=False)
    assert not out.exists()


def test_a_failed_export_leaves_no_new_directories(tmp_path: Path) -> None:
    problem = tmp_path / "no_model.py"
    problem.write_text("import torch\n\ndef get_inputs():\n    return [torch.randn(2)]\n")
    run = write_run(tmp_path / "run", problem, SOFTMAX[1])
    with pytest.raises(InputError, match="defines no class Model"):
        export_package([run], out=tmp_path / "new" / "deeper" / "pkg", isolate=False)
    assert not (tmp_path / "new").exists()


def test_a_package_that_appeared_meanwhile_is_replaced_only_with_force(tmp_path: Path) -> None:
    """Another export (or another rank's kernelwright.load) finished first: without force, keep it."""
    out = tmp_path / "pkg"
    out.mkdir()
    (out / "variants.json").write_text("{}")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "mine").write_text("")
    with pytest.raises(InputError, match="appeared while exporting"):
        _move_into_place(scratch, out, replace=False)
    assert (out / "variants.json").is_file() and scratch.is_dir()
    _move_into_place(scratch, out, replace=True)
    assert (out / "mine").is_file() and not scratch.exists()


def test_a_forward_argument_named_like_the_packages_own_names_is_renamed(tmp_path: Path) -> None:
    pkg, op, _ = export(tmp_path, '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, torch, needs):
        return torch * 2 + needs

def get_inputs():
    import torch as t
    return [t.randn(4, 8), t.randn(4, 8)]

def get_init_inputs():
    return []
''', '''
class ModelNew(nn.Module):
    def forward(self, torch, needs):
        return copy(torch * 2 + needs)
''', "shadowing")
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    torch.testing.assert_close(op(a, b), a * 2 + b)
