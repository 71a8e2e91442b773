"""``optimize --backward`` keeps to its --budget: the forward's search gets its share, the backward's what is left,
and a forward that spent everything leaves the backward written but not optimized (issue 33's defect: the backward
was given the whole budget again)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from kernelwright.cli import main

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(64, 32, requires_grad=True)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize(("forward_takes", "backward_gets"), [(10.0, 90.0), (100.5, None)])
def test_the_backward_gets_what_the_forward_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str], forward_takes: float,
                                                 backward_gets: float | None) -> None:
    import time

    from kernelwright.search import optimize

    clock = [1000.0]
    budgets: list[tuple[str, float]] = []

    def fake_optimize(problem, *, out_dir, deadline, **_):
        budgets.append((Path(problem).name, deadline.left()))  # the command's Deadline, passed on as it is
        clock[0] += forward_takes if len(budgets) == 1 else deadline.left()
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "report.md").write_text("report\n")
        return types.SimpleNamespace(best=None)

    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(optimize, "optimize", fake_optimize)
    problem = tmp_path / "relu2.py"
    problem.write_text(PROBLEM)
    main(["optimize", str(problem), "--out", str(tmp_path / "run"), "--device", "cpu", "--budget", "100s",
          "--backward"])
    assert budgets[0] == ("relu2.py", pytest.approx(60.0))  # the forward's share
    if backward_gets is None:
        assert len(budgets) == 1
        err = capsys.readouterr().err
        assert "backward: written to" in err and "not optimized" in err and "--budget" in err
        assert (tmp_path / "run" / "backward" / "problem.py").exists()  # written all the same
    else:
        assert budgets[1] == ("problem.py", pytest.approx(backward_gets))
    assert clock[0] - 1000.0 <= 100.5  # the command kept to its budget (the overrun is the forward's own)
