"""The backward written as a problem (`kernelwright.generate.backward`): its reference computes what autograd
computes, it stands alone, it keeps run-time sizes symbolic, and references it cannot differentiate are refused
with one line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from kernelwright.errors import InputError
from kernelwright.generate.backward import write_backward_problem
from kernelwright.problem.files import import_from_path, read_problem
from kernelwright.problem.sizes import reduced_sizes

from .conftest import write_problem

LINEAR_GELU_BIAS = """
    class Model(nn.Module):
        def __init__(self, n_in, n_out):
            super().__init__()
            self.fc = nn.Linear(n_in, n_out)

        def forward(self, x, shift):
            return F.gelu(self.fc(x)) + shift, x.sum(dim=-1)

    tokens = 96
    n_in = 24
    n_out = 16

    def get_inputs():
        return [torch.randn(tokens, n_in), torch.randn(n_out)]

    def get_init_inputs():
        return [n_in, n_out]
"""


def _load(path: Path, name: str):
    return import_from_path(path, f"kernelwright_test_backward_{name}")


def test_the_backward_problem_computes_what_autograd_computes(tmp_path: Path) -> None:
    forward_path = write_problem(tmp_path, "linear_gelu_bias", LINEAR_GELU_BIAS)
    written = write_backward_problem(forward_path, tmp_path / "backward.py")
    assert written.gradients == ("x", "shift", "fc.weight", "fc.bias")
    assert written.arguments == ("x", "shift", "fc_weight", "fc_bias", "grad_0", "grad_1")

    backward = _load(written.path, "linear")  # stands alone: the forward's source is embedded
    torch.manual_seed(5)
    args = backward.get_inputs()
    x, shift, weight, bias, g0, g1 = args
    assert g0.shape == (96, 16) and g1.shape == (96,)
    got = backward.Model()(*args)

    forward = _load(forward_path, "linear_forward")
    model = forward.Model(24, 16)
    with torch.no_grad():
        model.fc.weight.copy_(weight)
        model.fc.bias.copy_(bias)
    leaves = [x.clone().requires_grad_(), shift.clone().requires_grad_()]
    out, total = model(*leaves)
    want = torch.autograd.grad((out * g0).sum() + (total * g1).sum(), [*leaves, model.fc.weight, model.fc.bias])
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    # the gradient of `+ shift` is the column sum of the incoming gradient: a new tensor, never an argument
    assert all(g.data_ptr() != a.data_ptr() for g in got for a in args)


def test_run_time_sizes_stay_symbolic_and_shrink(tmp_path: Path) -> None:
    forward_path = write_problem(tmp_path, "norm", """
        class Model(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.norm = nn.LayerNorm(dim)

            def forward(self, x):
                return self.norm(x) * x.shape[0]

        rows = 4096
        dim = 256

        def get_inputs():
            return [torch.randn(rows, dim)]

        def get_init_inputs():
            return [dim]
    """)
    written = write_backward_problem(forward_path, tmp_path / "norm_backward.py")
    problem = read_problem(written.path)
    assert problem.size_globals == {"rows": 4096, "dim": 256}
    # rows follows the tensors; dim is the module's normalized shape (a number in the trace), so only rows shrinks
    assert set(reduced_sizes(problem)) == {"rows"}
    backward = _load(written.path, "norm")
    backward.rows = 7  # a second shape: the trace reads the row count from the tensor
    torch.manual_seed(0)
    x, weight, bias, grad = backward.get_inputs()
    (gx, gw, gb) = backward.Model()(x, weight, bias, grad)
    leaf = x.clone().requires_grad_()
    w, b = weight.clone().requires_grad_(), bias.clone().requires_grad_()
    out = torch.nn.functional.layer_norm(leaf, (256,), w, b) * 7
    for got, want in zip((gx, gw, gb), torch.autograd.grad((out * grad).sum(), (leaf, w, b))):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("body", "reason"), [
    ("""
        class Model(nn.Module):
            def forward(self, x):
                return torch.argmax(x, dim=-1)

        def get_inputs():
            return [torch.randn(4, 8)]

        def get_init_inputs():
            return []
    """, "nothing to differentiate"),
    ("""
        class Model(nn.Module):
            def forward(self, x):
                return F.dropout(x, p=0.5, training=True)

        def get_inputs():
            return [torch.randn(4, 8)]

        def get_init_inputs():
            return []
    """, "is random"),
])
def test_what_cannot_have_a_generated_backward(tmp_path: Path, body: str, reason: str) -> None:
    path = write_problem(tmp_path, "refused", textwrap.dedent(body))
    with pytest.raises(InputError, match=reason) as caught:
        write_backward_problem(path, tmp_path / "refused_backward.py")
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "refused_backward.py").exists()


def test_the_backward_of_a_half_precision_problem_runs_in_float64(tmp_path: Path) -> None:
    # The trace casts to fp32 for the math and back to bf16; the verifier's exact answer runs the same file in
    # float64, where every float cast must be to float64 (a fixed bf16 cast made it fail: no exact reference).
    forward_path = write_problem(tmp_path, "norm_bf16", """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(32, dtype=torch.bfloat16)

            def forward(self, x):
                return torch.softmax(self.norm(x), dim=-1)

        def get_inputs():
            return [torch.randn(9, 32, dtype=torch.bfloat16)]

        def get_init_inputs():
            return []
    """)
    written = write_backward_problem(forward_path, tmp_path / "norm_bf16_backward.py")
    backward = _load(written.path, "norm_bf16")
    torch.manual_seed(0)
    args = backward.get_inputs()
    native = backward.Model()(*args)
    exact = backward.Model()(*[a.double() for a in args])
    assert [t.dtype for t in native] == [torch.bfloat16] * 3 and [t.dtype for t in exact] == [torch.float64] * 3
    x, weight, bias, grad = (a.double() for a in args)
    leaves = [x.requires_grad_(), weight.requires_grad_(), bias.requires_grad_()]
    out = torch.softmax(torch.nn.functional.layer_norm(leaves[0], (32,), leaves[1], leaves[2]), dim=-1)
    for got, want in zip(exact, torch.autograd.grad((out * grad).sum(), leaves)):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


def test_a_swiglu_backward_plans_into_groups_that_can_be_ordered(tmp_path: Path) -> None:
    # Its trace builds `1 - sigmoid` with an in-place sub on a fresh buffer: the pointwise family claimed a chain
    # that a PyTorch node both fed and consumed, and emitting the candidate failed ("groups depend on each other in
    # a cycle"). Every group is now convex; the candidate is written and correct.
    from kernelwright.generate.graph import capture
    from kernelwright.generate.plan import convex, plan
    from kernelwright.records import Status
    from kernelwright.verify.records import VerifyOptions
    from kernelwright.verify.verifier import verify

    from .conftest import generate

    forward_path = write_problem(tmp_path, "swiglu", """
        class Model(nn.Module):
            def forward(self, x):
                gate, up = x.chunk(2, dim=-1)
                return F.silu(gate) * up

        def get_inputs():
            return [torch.randn(6, 2 * 40, dtype=torch.bfloat16)]

        def get_init_inputs():
            return []
    """)
    written = write_backward_problem(forward_path, tmp_path / "swiglu_backward.py")
    graph = capture(written.path)
    assert all(convex(graph, group.nodes) for group in plan(graph).groups)
    _, candidate = generate(written.path, tmp_path / "swiglu_backward_candidate.py")
    verdict = verify(written.path, candidate, VerifyOptions(device="cpu", seed=3))
    assert verdict.status is Status.PASSED, verdict.message
