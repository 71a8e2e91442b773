"""Problem and candidate files are read and checked without running them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.errors import InputError
from kernelwright.problem.files import read_candidate, read_problem

HERE = Path(__file__).parent


def test_reads_a_problem_and_its_size_globals() -> None:
    problem = read_problem(HERE / "problems" / "softmax.py")
    assert problem.size_globals == {"batch_size": 16, "dim": 300}
    assert problem.has_init_inputs
    assert len(problem.sha256) == 64


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("def get_inputs(): return []\n", "does not define Model"),
        ("class Model: pass\n", "does not define get_inputs"),
        ("Model = 3\ndef get_inputs(): return []\n", "Model must be a class"),
        ("class Model(:\n", "syntax error"),
    ],
)
def test_unusable_problems_are_one_line_input_errors(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "p.py"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        read_problem(path)
    message = str(info.value)
    assert expected in message and "\n" not in message and "p.py" in message


def test_missing_and_binary_files_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        read_problem(tmp_path / "nope.py")
    (tmp_path / "bin.py").write_bytes(b"\x00\x01")
    with pytest.raises(InputError, match="binary"):
        read_candidate(tmp_path / "bin.py")
    with pytest.raises(InputError, match="directory"):
        read_candidate(tmp_path)


def test_candidate_facts_are_found_statically() -> None:
    c = read_candidate(HERE / "candidates" / "softmax_ok.py")
    assert c.has_model_new and c.syntax_error is None
    assert c.triton_kernels == ("softmax_kernel",)
    assert c.problem_with_structure is None


def test_candidate_cuda_kernel_names_come_from_its_strings(tmp_path: Path) -> None:
    path = tmp_path / "c.py"
    path.write_text(
        'src = """\n__global__ void __launch_bounds__(256) add_kernel(const float* a, float* b) {}\n'
        'extern "C" __global__ void scale(float* x) {}\n"""\n'
        "from torch.utils.cpp_extension import load_inline\nclass ModelNew: pass\n"
    )
    c = read_candidate(path)
    assert c.cuda_kernels == ("add_kernel", "scale")
    assert c.uses_load_inline


def test_broken_candidates_are_data_not_errors(candidate) -> None:
    syntax = read_candidate(candidate("softmax_syntax.py"))
    assert syntax.syntax_error and "softmax_syntax.py:" in syntax.syntax_error
    missing = read_candidate(candidate("softmax_no_modelnew.py"))
    assert "no class ModelNew" in (missing.problem_with_structure or "")


def test_size_globals_are_read_from_chained_and_unpacked_assignments(tmp_path) -> None:
    path = tmp_path / "conv3d_like.py"
    path.write_text("import torch\n"
                    "batch_size = 16\n"
                    "height = width = 256\n"
                    "depth, rows, cols = 16, 2 * 16, 1 << 5\n"
                    "name, channels = 'x', 3\n"
                    "scale = 4\n"
                    "scale = float(scale)\n"  # rebound to something else: no longer a size knob
                    "class Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
                    "def get_inputs():\n    return [torch.randn(batch_size, depth, height, width)]\n")
    assert read_problem(path).size_globals == {"batch_size": 16, "height": 256, "width": 256, "depth": 16,
                                               "rows": 32, "cols": 32, "channels": 3}


def test_sizes_that_must_stay_equal_shrink_together(tmp_path) -> None:
    # Neither size can change alone (the product broadcasts the targets along the last dimension); together they can.
    from kernelwright.problem import sizes

    path = tmp_path / "hinge_like.py"
    path.write_text("import torch\n"
                    "batch_size = 4096\n"
                    "input_shape = (4096,)\n"
                    "class Model(torch.nn.Module):\n"
                    "    def forward(self, p, t):\n        return torch.mean(torch.clamp(1 - p * t, min=0))\n"
                    "def get_inputs():\n"
                    "    return [torch.rand(batch_size, *input_shape), torch.rand(batch_size)]\n")
    reduced = sizes.reduced_sizes(read_problem(path))
    assert reduced and len(set(reduced.values())) == 1 and set(reduced) == {"batch_size", "literal:4096"}


def test_sizes_the_model_refuses_are_skipped_not_raised(tmp_path) -> None:
    # The constructor asserts what some reduced sizes break (a vision transformer's patch divisibility).
    from kernelwright.problem import sizes

    path = tmp_path / "patches.py"
    path.write_text("import torch\n"
                    "image_size = 96\n"
                    "patch_size = 16\n"
                    "class Model(torch.nn.Module):\n"
                    "    def __init__(self, image_size, patch_size):\n"
                    "        super().__init__()\n"
                    "        assert image_size % patch_size == 0, 'Image dimensions must be divisible'\n"
                    "        self.proj = torch.nn.Linear(patch_size * patch_size, 64)\n"
                    "        self.p = patch_size\n"
                    "    def forward(self, x):\n"
                    "        b, h, w = x.shape\n"
                    "        x = x.reshape(b, h // self.p, self.p, w // self.p, self.p).permute(0, 1, 3, 2, 4)\n"
                    "        return self.proj(x.reshape(b, -1, self.p * self.p))\n"
                    "def get_inputs():\n    return [torch.rand(64, image_size, image_size)]\n"
                    "def get_init_inputs():\n    return [image_size, patch_size]\n")
    reduced = sizes.reduced_sizes(read_problem(path), max_elements=1 << 14, constructor=True)
    assert reduced and reduced.get("image_size", 96) % reduced.get("patch_size", 16) == 0
