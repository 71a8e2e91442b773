"""Extracting the ModelNew (and problem) file from LLM responses of every shape."""

from __future__ import annotations

import ast

import pytest

from kernelwright.llm.parse import ParseFailure, extract_modelnew, extract_problem, strip_reasoning

FENCE = "```"

KERNEL = """import torch
import triton
import triton.language as tl


@triton.jit
def _double_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
"""

MODEL = """import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _double_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
"""

WHOLE = KERNEL + "\n\n" + MODEL


def fenced(code: str, tag: str = "python", fence: str = FENCE) -> str:
    return f"{fence}{tag}\n{code.rstrip()}\n{fence}"


def defines(source: str, *names: str) -> bool:
    tree = ast.parse(source)
    found = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    return set(names) <= found


def test_single_block_with_prose_around():
    text = f"Here is a fused kernel.\n\n{fenced(WHOLE)}\n\nIt reads x once and writes y once."
    source = extract_modelnew(text)
    assert source == WHOLE.rstrip() + "\n"


@pytest.mark.parametrize("tag", ["python", "py", "Python", ""])
def test_fence_tags(tag):
    assert defines(extract_modelnew(fenced(WHOLE, tag)), "ModelNew", "_double_kernel")


def test_tilde_fence():
    text = "The file:\n" + fenced(WHOLE, "python", fence="~~~") + "\nDone."
    assert defines(extract_modelnew(text), "ModelNew", "_double_kernel")


def test_indented_fence_inside_a_list_item():
    indented = "\n".join("   " + line if line else "" for line in fenced(WHOLE).splitlines())
    assert defines(extract_modelnew("1. The code:\n" + indented), "ModelNew")


def test_blocks_joined_when_modelnew_uses_names_from_another_block():
    text = f"First the kernel:\n{fenced(KERNEL)}\nThen the module:\n{fenced(MODEL, 'py')}\n"
    source = extract_modelnew(text)
    assert defines(source, "ModelNew", "_double_kernel")
    assert source.index("_double_kernel(") < source.index("class ModelNew")
    lines = source.splitlines()
    assert lines[0].startswith("import")  # imports of both blocks first
    assert source.count("import torch\n") == 1


def test_unrelated_blocks_not_joined_and_last_modelnew_wins():
    shell = fenced("pip install triton", "bash")
    first = WHOLE.replace("2 * tl.load", "3 * tl.load")
    text = f"{fenced(first)}\nOn second thought:\n{fenced(WHOLE)}\n{shell}\n"
    source = extract_modelnew(text)
    assert "2 * tl.load" in source and "3 * tl.load" not in source
    assert "pip install" not in source


def test_think_block_is_stripped():
    reasoning = "<think>Maybe class ModelNew should be\n" + fenced("class ModelNew: pass") + "\nno.</think>\n"
    source = extract_modelnew(reasoning + fenced(WHOLE))
    assert defines(source, "_double_kernel")
    assert strip_reasoning(reasoning + "answer") == "answer"


def test_closing_think_without_opening_tag():
    text = "I will fuse both loops.\n</think>\n\n" + fenced(WHOLE)
    assert strip_reasoning(text).startswith(FENCE)
    assert defines(extract_modelnew(text), "ModelNew")


def test_unclosed_think_means_no_answer():
    text = "<think>Let me think about tiling. " + fenced(WHOLE) + " hmm, and then"
    assert strip_reasoning(text) == ""
    with pytest.raises(ParseFailure, match=r"<think>.*finish_reason=length"):
        extract_modelnew(text, finish_reason="length")


def test_bare_code_without_fence():
    assert extract_modelnew(WHOLE) == WHOLE.rstrip() + "\n"


def test_truncated_block_accepted_when_it_parses():
    text = "Here:\n" + FENCE + "python\n" + WHOLE  # the closing fence never came
    assert defines(extract_modelnew(text, finish_reason="length"), "ModelNew")


def test_truncated_block_refused_when_cut_mid_statement():
    text = "Here:\n" + FENCE + "python\n" + WHOLE + "\n    def extra(self, a,\n"
    with pytest.raises(ParseFailure, match=r"cut off \(finish_reason=length.*syntax error at line \d+"):
        extract_modelnew(text, finish_reason="length")


def test_missing_block():
    with pytest.raises(ParseFailure, match="no python code block defining class ModelNew"):
        extract_modelnew("I would use a Triton kernel with 128-bit loads.")


def test_syntax_error_reports_line_and_message():
    broken = WHOLE.replace("return y", "return y)")
    with pytest.raises(ParseFailure) as info:
        extract_modelnew(fenced(broken))
    message = str(info.value)
    line = broken.splitlines().index("        return y)") + 1
    assert f"syntax error at line {line}" in message and "return y)" in message
    assert "\n" not in message


def test_file_without_modelnew():
    with pytest.raises(ParseFailure, match="defines no class ModelNew"):
        extract_modelnew(fenced(KERNEL))


def test_problem_gets_get_init_inputs_added():
    problem = """import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(N, N, dtype=torch.bfloat16)]
"""
    source = extract_problem("Sure.\n" + fenced(problem))
    assert defines(source, "Model", "get_inputs", "get_init_inputs")
    namespace: dict = {}
    exec(source[source.index("def get_init_inputs"):], namespace)
    assert namespace["get_init_inputs"]() == []


def test_problem_keeps_its_own_get_init_inputs_and_needs_get_inputs():
    problem = "import torch.nn as nn\n\nclass Model(nn.Module):\n    pass\n\n\ndef get_init_inputs():\n    return [3]\n"
    with pytest.raises(ParseFailure, match="get_inputs"):
        extract_problem(fenced(problem))
    full = problem + "\n\ndef get_inputs():\n    return []\n"
    assert extract_problem(fenced(full)).count("def get_init_inputs") == 1


def test_problem_missing_model():
    with pytest.raises(ParseFailure, match="class Model"):
        extract_problem(fenced("def get_inputs():\n    return []\n"))
