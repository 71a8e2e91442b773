"""Values the kernels are specialised on (generate/specialize.py): a ModelNew built with other constructor
arguments, or whose attribute changes afterwards, still computes what the reference computes."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.generate.conftest import SCRIPT_LOADER, generate, write_problem

from kernelwright.generate.graph import capture
from kernelwright.generate.specialize import keyed, specialized_attributes

PROBLEM = """
class Model(nn.Module):
    def __init__(self, features, num_groups, scaling_factor, min_val):
        super().__init__()
        self.gemm = nn.Linear(features, features)
        self.norm = nn.GroupNorm(num_groups, features)
        self.act = nn.Hardtanh(min_val=min_val, max_val=2.0)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        return self.act(self.norm(self.gemm(x))) * self.scaling_factor

batch_size = 8
features = 32

def get_inputs():
    return [torch.randn(batch_size, features)]

def get_init_inputs():
    return [features, 4, 0.5, -1.0]
"""


def test_the_constants_are_found_and_the_sizes_are_not(tmp_path) -> None:
    graph = capture(write_problem(tmp_path, "specialized", PROBLEM))
    found = dict(graph.specialized)
    assert found["norm.num_groups"] == 4 and found["norm.eps"] == 1e-05
    assert (found["act.min_val"], found["act.max_val"], found["scaling_factor"]) == (-1.0, 2.0, 0.5)
    # sizes are read from the tensors: a ModelNew of other sizes runs its own kernels
    assert not {"gemm.in_features", "gemm.out_features", "norm.num_channels"} & set(found)


def test_an_integer_that_is_a_weight_dimension_is_a_size() -> None:
    import torch

    literals = keyed([4, 32, 1e-05, True])
    assert specialized_attributes(torch.nn.GroupNorm(4, 32), literals) == (
        ("num_groups", 4), ("eps", 1e-05), ("affine", True))
    # num_channels (32) is its weight's size; here the group count is one too, and is taken for a size
    assert specialized_attributes(torch.nn.GroupNorm(4, 4), literals) == (("eps", 1e-05), ("affine", True))
    # a padding of 1 is no size, though a bias of shape (C, 1, 1) has dimensions of 1; a literal 1 is no True
    conv = torch.nn.Sequential(torch.nn.Conv2d(4, 8, 3, padding=1))
    assert specialized_attributes(conv, keyed([1])) == (("0.stride", (1, 1)), ("0.padding", (1, 1)),
                                                        ("0.dilation", (1, 1)), ("0.groups", 1))
    # a pooling window is structure, though a convolution's kernel has the same size; in a static capture the
    # inputs' sizes are literals too, and a window equal to one of them is taken for a size
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 2), torch.nn.MaxPool2d(2))
    assert specialized_attributes(model, keyed([2])) == (("1.kernel_size", 2), ("1.stride", 2))
    assert specialized_attributes(model, keyed([2]), {2, 64}) == ()


_CALLS = SCRIPT_LOADER + """
import warnings

problem, candidate = load(sys.argv[1], "problem"), load(sys.argv[2], "candidate")
x = torch.randn(8, 32)

def pair(*init):
    torch.manual_seed(0)
    model = problem.Model(*init)
    new = candidate.ModelNew(*init)
    new.load_state_dict(model.state_dict())
    return model, new

def same(model, new, *, falls_back):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = new(x)
    warned = any("forward as written" in str(w.message) for w in caught)
    assert warned == falls_back, (warned, falls_back)
    torch.testing.assert_close(got, model(x), rtol=1e-4, atol=1e-5)

same(*pair(32, 4, 0.5, -1.0), falls_back=False)   # the values the kernels were written for: its own kernels
same(*pair(32, 8, 0.5, -1.0), falls_back=True)    # another group count
same(*pair(32, 4, 0.25, -1.0), falls_back=True)   # another scaling factor
model, new = pair(32, 4, 0.5, -1.0)
same(model, new, falls_back=False)
model.act.min_val = new.act.min_val = -0.25       # changed after construction (and after a first call)
same(model, new, falls_back=True)
print("specialized ok")
"""


def test_model_new_built_otherwise_computes_what_the_reference_does(tmp_path) -> None:
    problem = write_problem(tmp_path, "specialized", PROBLEM)
    _, candidate = generate(problem, tmp_path / "specialized_candidate.py")
    text = candidate.read_text()
    assert "_KW_SPECIALIZED" in text and "def _forward_as_written(self, x)" in text
    done = subprocess.run([sys.executable, "-c", _CALLS, str(problem), str(candidate)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0 and "specialized ok" in done.stdout, done.stderr[-2000:]
