"""Family 8: batch-statistics normalisation — training-mode batch norm with its running statistics written back
to the module's buffers, instance norm (a batch norm of the input viewed as [1, N * C, *]) and BatchNorm1d over
[N, C] — with the pointwise epilogue in the apply pass, proven under the interpreter on small odd shapes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from tests.generate.conftest import SCRIPT_LOADER

from kernelwright.generate.graph import capture
from kernelwright.generate.plan import plan as make_plan
from kernelwright.records import Status

TRAINING = """
    class Model(nn.Module):
        def __init__(self, channels, momentum):
            super().__init__()
            self.bn = nn.BatchNorm2d(channels, momentum=momentum)
            self.norm = nn.InstanceNorm2d(channels)
            self.bn1 = nn.BatchNorm1d(6)
            with torch.no_grad():
                self.bn.weight.uniform_(0.5, 1.5)
                self.bn.bias.uniform_(-0.5, 0.5)
                self.bn.running_var.uniform_(0.5, 2.0)

        def forward(self, x, shift, z):
            return torch.tanh(self.bn(x) + shift) * 2.0, self.norm(x), self.bn1(z)

    def get_inputs():
        return [torch.randn(3, 5, 7, 6) * 3.0 + 1.0, torch.randn(5, 1, 1), torch.randn(9, 6)]

    def get_init_inputs():
        return [5, 0.3]
"""


def _families(plan) -> list[str]:
    return [g.family for g in plan.groups]


@pytest.mark.slow
@pytest.mark.parametrize("config_index", [0, 2])
def test_training_batch_norm_instance_norm_and_1d(check, config_index: int) -> None:
    # Config 0 and 2 differ in block size: with 5 channels of 3 x 42 elements, config 2's 512-element blocks give a
    # channel one share and config 0 one block; a second shape comes from the verifier's trials.
    plan, verdict = check(f"bn_train_{config_index}", TRAINING, config_index=config_index,
                          distribution_trials=False)
    bn_groups = [g for g in plan.groups if g.family == "batchnorm"]
    assert len(bn_groups) == 3 and plan.fully_covered, plan.describe()
    first = bn_groups[0]
    assert {"tanh", "add"} <= {n.split("_")[0] for n in first.detail["epilogue"]}  # the epilogue is fused
    assert verdict.status is Status.PASSED, verdict.message
    assert not any(k.origin == "library" and "batch_norm" in k.name for k in verdict.kernels)


_STEPS = SCRIPT_LOADER + """
reference, generated = load(sys.argv[1], "ref"), load(sys.argv[2], "new")
torch.manual_seed(0)
model, new = reference.Model(5, 0.3), generated.ModelNew(5, 0.3)
new.load_state_dict(model.state_dict())
inputs = reference.get_inputs()
with torch.no_grad():
    for _ in range(2):  # twice: the second step starts from the first one's statistics
        want, got = model(*inputs), new(*inputs)
for a, b in zip(want, got):
    torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)
theirs, ours = model.state_dict(), new.state_dict()
for key in ("bn.running_mean", "bn.running_var", "bn1.running_mean", "bn1.running_var"):
    torch.testing.assert_close(ours[key], theirs[key], rtol=1e-5, atol=1e-6)
assert int(ours["bn.num_batches_tracked"]) == int(theirs["bn.num_batches_tracked"]) == 2
print("state ok")
"""


def test_running_statistics_follow_the_module(tmp_path) -> None:
    """The generated ModelNew updates the module's running statistics in place as PyTorch does, step after step,
    and counts the batches (the verifier compares outputs, not module state: this checks the state). Momentum and
    eps are the captured numbers, written into the kernels. In a process of its own, under the interpreter."""
    from tests.generate.conftest import generate, write_problem

    problem = write_problem(tmp_path, "bn_state", TRAINING)
    _, candidate = generate(problem, tmp_path / "bn_state_candidate.py")
    done = subprocess.run([sys.executable, "-c", _STEPS, str(problem), str(candidate)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0 and "state ok" in done.stdout, done.stderr[-2000:]


def test_eval_mode_is_not_this_familys(tmp_path) -> None:
    # Eval mode normalises with the running statistics: a pointwise affine map, not a batch reduction. (momentum=None
    # makes the update depend on num_batches_tracked's value, which torch.export refuses to capture.)
    problem = tmp_path / "bn_kinds.py"
    problem.write_text("import torch\nimport torch.nn as nn\n\n" + textwrap.dedent("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.frozen = nn.BatchNorm2d(4).eval()

            def forward(self, x):
                return self.frozen(x)

        def get_inputs():
            return [torch.randn(2, 4, 3, 3)]

        def get_init_inputs():
            return []
    """))
    graph = capture(problem)
    plan = make_plan(graph)
    assert "batchnorm" not in _families(plan)


@pytest.mark.slow
def test_a_candidate_that_skips_the_running_statistics_is_incorrect(tmp_path) -> None:
    """The verifier compares the module's buffers after the first trial with the reference's: a candidate whose
    outputs are right but that leaves the running variance alone is incorrect (``module-state``)."""
    from tests.generate.conftest import generate, write_problem

    from kernelwright.verify.records import VerifyOptions
    from kernelwright.verify.verifier import verify

    problem = write_problem(tmp_path, "bn_skip", TRAINING)
    _, candidate = generate(problem, tmp_path / "bn_skip_candidate.py")
    source = candidate.read_text()
    line = next(ln for ln in source.splitlines() if "self.bn.running_var.copy_(" in ln)
    candidate.write_text(source.replace(line + "\n", ""))
    verdict = verify(problem, candidate, VerifyOptions(device="cpu", seed=3, distribution_trials=False,
                                                       shape_trial=False))
    assert verdict.status is Status.INCORRECT, verdict.message
    finding = next(f for f in verdict.findings if f.code == "module-state")
    assert "bn.running_var" in finding.message and "bn.running_mean" not in finding.message
