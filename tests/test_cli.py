"""The command line's contract: exit codes 0/1/2, one clear line for bad input, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.cli import main

VERIFY = Path(__file__).parent / "verify"
PROBLEM = VERIFY / "problems" / "softmax.py"


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    return err


def test_missing_file_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "no/such/problem.py", str(VERIFY / "candidates" / "softmax_ok.py")]) == 2
    err = _one_line_error(capsys)
    assert "no/such/problem.py" in err and "does not exist" in err


def test_problem_syntax_error_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad_problem.py"
    bad.write_text("class Model(nn.Module:\n    pass\n")
    assert main(["verify", str(bad), str(VERIFY / "candidates" / "softmax_ok.py")]) == 2
    err = _one_line_error(capsys)
    assert "bad_problem.py:1" in err and "syntax error" in err


def test_problem_whose_model_raises_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "raising_problem.py"
    bad.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        raise ValueError('bad size')\n"
        "def get_inputs():\n    return [torch.randn(4)]\ndef get_init_inputs():\n    return []\n"
    )
    code = main(["verify", "--device", "cpu", str(bad), str(VERIFY / "candidates" / "softmax_ok.py")])
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "raising_problem.py" in err and "ValueError: bad size" in err


def test_bad_flag_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["verify", "--tolerance", "loose", str(PROBLEM), str(PROBLEM)])
    assert info.value.code == 2
    err = _one_line_error(capsys)
    assert "--tolerance" in err and "--help" in err


@pytest.mark.slow
def test_incorrect_candidate_exits_1_and_json_is_the_full_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["verify", "--device", "cpu", "--seed", "3", "--json", str(PROBLEM),
                 str(VERIFY / "candidates" / "softmax_wrong.py")])
    assert code == 1
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "incorrect" and data["seed"] == 3
    assert any(f["code"] == "mismatch" for f in data["findings"])
    assert len(data["trials"]) >= 7


def test_python_dash_m_and_console_script_agree() -> None:
    out = subprocess.run([sys.executable, "-m", "kernelwright", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("kernelwright ")


def test_passing_candidate_exits_0_with_a_table() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kernelwright", "verify", "--device", "cpu", str(PROBLEM),
         str(VERIFY / "candidates" / "softmax_ok.py")],
        capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("verdict      passed")
    for row in ("seed", "trials", "accuracy", "timing", "kernels"):
        assert f"\n{row}" in out.stdout


def test_a_problem_the_templates_cannot_take_exits_1_not_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Valid problems, no bad input: one whose only operator no template covers (named), one torch.export refuses
    # (a plain tensor attribute the forward rebinds). Exit 1, as for any verdict but passed; a broken file is 2.
    sort = tmp_path / "sort_rows.py"
    sort.write_text("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                    "    def forward(self, x):\n        return torch.sort(x, dim=-1)[0]\n\n"
                    "def get_inputs():\n    return [torch.randn(4, 8)]\n\ndef get_init_inputs():\n    return []\n")
    assert main(["optimize", "--device", "cpu", "--out", str(tmp_path / "run1"), str(sort)]) == 1
    assert "no template covers any part" in capsys.readouterr().err
    stateful = tmp_path / "stateful.py"
    stateful.write_text("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                        "    def __init__(self):\n        super().__init__()\n        self.h = torch.zeros(4, 8)\n\n"
                        "    def forward(self, x):\n        self.h.copy_(x)\n        self.h = torch.tanh(self.h + x)\n"
                        "        return self.h * 2\n\n"
                        "def get_inputs():\n    return [torch.randn(4, 8)]\n\ndef get_init_inputs():\n    return []\n")
    assert main(["optimize", "--device", "cpu", "--out", str(tmp_path / "run2"), str(stateful)]) == 1
    err = capsys.readouterr().err.strip()
    assert "cannot be captured with torch.export" in err and len(err.splitlines()) == 1


def test_a_command_that_runs_jobs_starts_their_zygote_before_it_imports_torch(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The zygote's imports and the parent's run side by side: it is started right after the arguments are read,
    for the device the command will use (asked without torch), and only by commands that run jobs."""
    from kernelwright.isolation import process

    started: list[str | None] = []
    monkeypatch.setattr(process, "warm_zygote", lambda device, *a, **k: started.append(device) or True)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU to be seen: the automatic device is the CPU
    assert main(["verify", "missing-problem.py", "missing-candidate.py"]) == 2
    assert main(["verify", "missing-problem.py", "missing-candidate.py", "--device", "cuda"]) == 2
    assert main(["config"]) == 0  # prints the settings; runs no job
    capsys.readouterr()
    assert started == ["cpu", "cuda"]
