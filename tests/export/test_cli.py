"""``kernelwright export`` and ``--list``; ``kernelwright.load``; every bad input is one line, exit 2, nothing written."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import kernelwright
from kernelwright.cli import main
from kernelwright.errors import InputError
from kernelwright.export.api import export_package

from .conftest import LAYERNORM, SOFTMAX, import_package, unique_package


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main(["export", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_export_then_list(make_run: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI path: the probe runs in a child process."""
    run = make_run(SOFTMAX)
    out = tmp_path / "pkgs" / unique_package()
    code, stdout, _ = run_cli(capsys, run, "--name", "softmax", "--out", out)
    assert code == 0
    assert f"torch.ops.kernelwright_{out.name}.softmax  (triton_op" in stdout
    module = import_package(out)
    x = torch.randn(3, 10)
    torch.testing.assert_close(module.Softmax()(x), x.softmax(-1))
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name]  # no scratch left behind

    code, stdout, _ = run_cli(capsys, "--list", out)
    assert code == 0
    lines = stdout.splitlines()
    assert lines[0].startswith(f"{out.name}: torch.ops.kernelwright_{out.name}.softmax (triton_op")
    assert lines[2].split()[:4] == ["variant", "arch", "runs", "on"]
    assert lines[3].split()[:6] == ["sm_90a", "sm_90a", "cc", "9.0", "only", "triton"]
    assert lines[4].startswith("reference")
    code, stdout, _ = run_cli(capsys, "--list", out, "--json")
    assert json.loads(stdout)["variants"][0]["source"]["run"] == str(run.resolve())

    # an existing package needs --force; with it, it is replaced
    code, _, err = run_cli(capsys, run, "--out", out)
    assert code == 2 and "already exists (an exported package); pass --force" in err
    code, stdout, _ = run_cli(capsys, run, "--out", out, "--force", "--name", "softmax2")
    assert code == 0 and json.loads((out / "variants.json").read_text())["op"] == "softmax2"


def test_load_returns_the_module_class(make_run: Callable[..., Path]) -> None:
    run = make_run(SOFTMAX)
    cls = kernelwright.load(run)
    assert cls.__name__ == "SoftmaxSmall" and issubclass(cls, torch.nn.Module)
    x = torch.randn(2, 5)
    torch.testing.assert_close(cls()(x), x.softmax(-1))
    package = sys.modules[cls.__module__]
    assert hasattr(getattr(torch.ops, f"kernelwright_{package.__name__}"), "softmax_small")
    assert kernelwright.load(run) is cls  # built once, imported once
    assert [v["id"] for v in package.variants()] == ["sm_90a"]


def test_import_kernelwright_stays_light() -> None:
    import subprocess

    code = "import sys, kernelwright; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def _nothing_written(parent: Path, before: set[str]) -> None:
    assert {p.name for p in parent.iterdir()} == before


BadCase = Callable[[Callable[..., Path], Path], list[Any]]


def _without(name: str) -> BadCase:
    def case(make_run: Callable[..., Path], tmp: Path) -> list[Any]:
        run = make_run(SOFTMAX)
        (run / name).unlink()
        return [run]
    return case


def _edited_best(make_run: Callable[..., Path], tmp: Path) -> list[Any]:
    run = make_run(SOFTMAX)
    (run / "best.py").write_text((run / "best.py").read_text() + "\n# edited\n")
    return [run]


def _mismatched_state(make_run: Callable[..., Path], tmp: Path) -> list[Any]:
    candidate = LAYERNORM[1].read_text().replace("self.norm = nn.LayerNorm(dim, eps=1e-5)",
                                                 "self.norm = nn.LayerNorm(dim + 1, eps=1e-5)")
    return [make_run(LAYERNORM, candidate=candidate)]


BAD_INPUTS: dict[str, tuple[BadCase, str]] = {
    "no run folder": (lambda mk, tmp: [tmp / "nope"], "does not exist"),
    "no run.json": (_without("run.json"), "has no run.json"),
    "no best.py": (_without("best.py"), "has no best.py"),
    "not passed": (lambda mk, tmp: [mk(SOFTMAX, status="incorrect")], "did not pass verification (status incorrect)"),
    "best.py changed": (_edited_best, "best.py is not the file the verdict judged"),
    "same arch twice": (lambda mk, tmp: [mk(SOFTMAX), mk(SOFTMAX)], "are both the sm_90a highest-precision variant"),
    "different problems": (lambda mk, tmp: [mk(SOFTMAX), mk(LAYERNORM)], "are of different problems"),
    "unknown arch": (lambda mk, tmp: [mk(SOFTMAX, arch="sm_60")], "targets sm_60, an arch kernelwright's hardware"),
    "amd arch": (lambda mk, tmp: [mk(SOFTMAX, arch="gfx942")], "an AMD arch"),
    "state mismatch": (_mismatched_state, "ModelNew holds norm.weight(8193,), norm.bias(8193,), the reference"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input(case: str, make_run: Callable[..., Path], tmp_path: Path,
                   capsys: pytest.CaptureFixture[str]) -> None:
    build, message = BAD_INPUTS[case]
    runs = build(make_run, tmp_path)
    parent = tmp_path / "out"
    parent.mkdir()
    code, stdout, err = run_cli(capsys, *runs, "--out", parent / "pkg")
    assert code == 2, err
    assert message in err
    assert err.count("\n") == 1 and err.startswith("kernelwright export: ")
    _nothing_written(parent, set())


@pytest.mark.parametrize(("name", "message"), [("2fast", "is not a valid op name"), ("my-op", "is not a valid op"),
                                               ("variants", "clashes with a name the package defines")])
def test_bad_op_name(name: str, message: str, make_run: Callable[..., Path], tmp_path: Path,
                     capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, make_run(SOFTMAX), "--name", name, "--out", tmp_path / "pkg")
    assert code == 2 and message in err
    assert not (tmp_path / "pkg").exists()


def test_bad_package_names_and_destinations(make_run: Callable[..., Path], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(SOFTMAX)
    code, _, err = run_cli(capsys, run, "--out", tmp_path / "my-kernels")
    assert code == 2 and "is not a Python identifier" in err
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    code, _, err = run_cli(capsys, run, "--out", precious, "--force")
    assert code == 2 and "is not a package kernelwright export wrote" in err
    assert (precious / "notes.txt").read_text() == "keep me"
    code, _, err = run_cli(capsys, "--list", tmp_path)
    assert code == 2 and "no variants.json" in err
    code, _, err = run_cli(capsys, run)
    assert code == 2 and "give --out DIR" in err


def test_failed_probe_leaves_an_existing_package_alone(make_run: Callable[..., Path], tmp_path: Path) -> None:
    out = tmp_path / unique_package()
    export_package([make_run(LAYERNORM)], out=out, isolate=False, trace=False)
    before = (out / "variants.json").read_text()
    with pytest.raises(InputError, match="ModelNew holds"):
        export_package(_mismatched_state(make_run, tmp_path), out=out, force=True, isolate=False)
    assert (out / "variants.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("run")) == [out.name]
