"""What goes into the LLM's prompt: the rules, the problem, the target's facts, the verifier's feedback.

    messages = build_messages(problem_source=src, problem_name="softmax.py", arch="sm_90a", gpu=lookup("H200"),
                              policy=Policy(), stage=choose_stage(best), best=best, last=last)

The prose lives in ``prompts/*.md`` (rendered with :class:`string.Template`, ``$name`` placeholders, by
:mod:`.templates`); this module picks the stage and the pieces and puts the messages together. A verdict becomes
the report a model can act on in :mod:`.feedback` (:func:`feedback`), the target's facts come from :mod:`.target`
(:func:`hardware_facts`); both, and the template functions, are importable from here as before.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kernelwright.llm.feedback import INSTRUCTION_CODES, Attempt, feedback
from kernelwright.llm.target import _arch, _resolve_gpu, hardware_facts
from kernelwright.llm.templates import (
    PromptTemplateError,
    _hint,
    _sections,
    load_template,
    placeholders,
    render,
)
from kernelwright.records import Severity

if TYPE_CHECKING:
    from kernelwright.generate.families.base import Policy
    from kernelwright.hardware.spec import GpuSpec
    from kernelwright.verify.records import Verdict

__all__ = [
    "INSTRUCTION_CODES", "LANGUAGES", "MEMORY_TARGET_PERCENT", "STAGES", "TENSOR_DOMINANT", "Attempt",
    "PromptTemplateError", "build_crossover_messages", "build_messages", "build_mutation_messages",
    "build_problem_messages", "choose_stage", "feedback", "hardware_facts", "load_template", "placeholders",
    "render", "stage_instruction", "system_message",
]

STAGES = ("correctness", "memory", "instructions")
LANGUAGES = ("triton", "cuda")
TENSOR_DOMINANT = ("matmul", "conv", "attention")
MEMORY_TARGET_PERCENT = 85.0  # a memory-bound kernel below this share of the achievable floor works on its accesses
# Instruction findings that call for a different instruction path (the "instructions" stage).
_PATH_CODES = frozenset({"no-tensor-core", "legacy-mma-on-hopper", "legacy-mma-on-blackwell", "wgmma-serialized",
                         "spills", "local-memory", "scalar-global-access", "low-occupancy"})


# ----------------------------------------------------------------------------------------------------- stages


def choose_stage(best: Attempt | None) -> str:
    """``"correctness"`` until a kernel passes; then, for a memory-bound problem below about 85 % of its roofline
    floor (or not timed), ``"memory"``; for a matmul/conv/attention-dominant problem, or a memory-bound one at the
    floor whose SASS still shows problems, ``"instructions"``."""
    verdict = best.verdict if best else None
    if verdict is None or not verdict.passed:
        return "correctness"
    traits = verdict.traits
    if traits is not None and traits.dominant in TENSOR_DOMINANT:
        return "instructions"
    if traits is None and verdict.roofline is not None and verdict.roofline.bound == "compute":
        return "instructions"
    percent = verdict.percent_of_floor
    if percent is None or percent < MEMORY_TARGET_PERCENT:
        return "memory"
    if any(f.code in _PATH_CODES and f.severity is not Severity.NOTE for f in verdict.findings):
        return "instructions"
    return "memory"


def _progress(verdict: Verdict | None) -> str:
    if verdict is None:
        return ""
    cand = verdict.median_ms()
    floor = verdict.roofline.achievable_floor_ms if verdict.roofline is not None else None
    if cand and verdict.percent_of_floor is not None and floor:
        return (f", at {verdict.percent_of_floor:.0f}% of its achievable roofline floor ({cand:.4f} ms "
                f"against {floor:.4f} ms)")
    if cand:
        speed = verdict.speedups.get("vs_compile_max_autotune") or verdict.speedups.get("vs_compile")
        return f" and runs in {cand:.4f} ms" + (f" ({speed:.2f}x torch.compile)" if speed else "")
    return " (its speed was not measured: no GPU here)"


def _focus(verdict: Verdict | None, codes: frozenset[str]) -> str:
    """One line naming the findings to fix first (the report above explains each)."""
    if verdict is None:
        return ""
    chosen = list(dict.fromkeys(f.code for f in verdict.findings
                                if f.code in codes and f.severity is not Severity.NOTE))
    if not chosen:
        return ""
    return "- Fix first what the verifier found in the best kernel: " + ", ".join(f"`{c}`" for c in chosen) + "."


def _tensor_core_path(arch: str) -> str:
    spec = _arch(arch)
    features = spec.features if spec else frozenset()
    for key in ("tcgen05", "wgmma", "mma.sync"):
        if key in features:
            return _hint("tensor-core-path", key)
    return "the fastest matrix instructions the arch has"


def _bytes(n: float) -> str:
    for factor, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= factor:
            return f"{n / factor:.4g} {unit}"
    return f"{n:.0f} B"


def stage_instruction(stage: str, *, arch: str, gpu: GpuSpec | None = None, best: Attempt | None = None,
                      last: Attempt | None = None) -> str:
    """The "what to do now" paragraph for ``stage``."""
    if stage not in STAGES:
        raise ValueError(f"stage {stage!r} is not one of {', '.join(STAGES)}")
    verdict = best.verdict if best else None
    if stage == "correctness":
        if best is None and last is None:
            situation = "No verified kernel exists yet."
        elif last is not None and (last.verdict is None or not last.verdict.passed):
            situation = "The last attempt failed; the verifier's report above says why."
        else:
            situation = "No kernel has passed yet."
        return render("stage_correctness.md", situation=situation)
    traits = verdict.traits if verdict else None
    if stage == "memory":
        sms = gpu.sm_count if gpu else "the"
        nbytes = _bytes(traits.bytes) if traits and traits.bytes else "its inputs and outputs"
        return render("stage_memory.md", progress=_progress(verdict), bytes=nbytes, sms=sms,
                      focus=_focus(verdict, INSTRUCTION_CODES | {"library-share"}))
    if traits is not None and traits.dominant not in TENSOR_DOMINANT:
        return render("stage_instructions_memory.md", progress=_progress(verdict),
                      focus=_focus(verdict, INSTRUCTION_CODES))
    return render("stage_instructions_tensor.md", progress=_progress(verdict),
                  dominant=traits.dominant if traits else "matmul", dtype=(traits.compute_dtype if traits else None)
                  or "its", arch=arch, tensor_core_path=_tensor_core_path(arch),
                  focus=_focus(verdict, INSTRUCTION_CODES))


# ----------------------------------------------------------------------------------------------------- messages


def _precision_text(policy: Policy) -> str:
    key = {(False, False): "strict", (True, False): "tf32", (False, True): "reduced",
           (True, True): "tf32+reduced"}[(bool(policy.allow_tf32), bool(policy.allow_reduced_precision))]
    return _sections("precision.md")[key]


def _gencode(arch: str) -> str:
    digits = arch.removeprefix("sm_")
    return f"-gencode=arch=compute_{digits},code=sm_{digits}"


def system_message(*, arch: str, gpu: GpuSpec | str | None = None, policy: Policy, language: str = "triton") -> str:
    if language not in LANGUAGES:
        raise ValueError(f"language {language!r} is not one of {', '.join(LANGUAGES)}")
    gpu = _resolve_gpu(gpu)
    target = f"an NVIDIA {gpu.name} ({arch})" if gpu else f"NVIDIA {arch}"
    rules = render(f"language_{language}.md", arch=arch, gencode=_gencode(arch))
    return render("system.md", target=target, language_rules=rules, precision_policy=_precision_text(policy))


def _attempt_block(attempt: Attempt, heading: str, max_lines: int) -> str:
    label = f" ({attempt.label})" if attempt.label else ""
    if attempt.source:
        code = f"```python\n{attempt.source.rstrip()}\n```"
    else:
        code = "No file could be taken from that response."
    return render("attempt.md", heading=heading + label, code=code, feedback=feedback(attempt, max_lines=max_lines))


def _same(a: Attempt, b: Attempt) -> bool:
    return a is b or (a.source is not None and a.source == b.source)


def _user_message(template: str, *, problem_source: str, problem_name: str, arch: str, gpu: GpuSpec | None,
                  ceilings: Any, stage: str, attempts: str, instruction: str) -> str:
    return render(template, problem_name=problem_name, problem_source=problem_source.rstrip(),
                  hardware_facts=hardware_facts(arch, gpu, ceilings), attempts=f"{attempts}\n\n" if attempts else "",
                  stage=stage, stage_instruction=instruction, output_format=render("output_format.md"))


def build_messages(*, problem_source: str, problem_name: str, arch: str, gpu: GpuSpec | str | None = None,
                   ceilings: Mapping[str, Any] | Any = None, policy: Policy, stage: str, best: Attempt | None = None,
                   last: Attempt | None = None, language: str = "triton",
                   feedback_lines: int = 40) -> list[dict[str, str]]:
    """``[system, user]`` messages asking for a ``ModelNew`` file: the rules, the problem, the target, the best
    kernel so far and the last attempt (when it differs) with the verifier's reports, and the stage's goal."""
    gpu = _resolve_gpu(gpu)
    blocks = []
    if best is not None:
        blocks.append(_attempt_block(best, "Best verified kernel so far", feedback_lines))
    if last is not None and (best is None or not _same(last, best)):
        blocks.append(_attempt_block(last, "Your last attempt", feedback_lines))
    instruction = stage_instruction(stage, arch=arch, gpu=gpu, best=best, last=last)
    user = _user_message("optimize.md", problem_source=problem_source, problem_name=problem_name, arch=arch,
                         gpu=gpu, ceilings=ceilings, stage=stage, attempts="\n\n".join(blocks), instruction=instruction)
    return [{"role": "system", "content": system_message(arch=arch, gpu=gpu, policy=policy, language=language)},
            {"role": "user", "content": user}]


def build_mutation_messages(parent: Attempt, *, problem_source: str, problem_name: str, arch: str,
                            gpu: GpuSpec | str | None = None, ceilings: Mapping[str, Any] | Any = None,
                            policy: Policy, stage: str, language: str = "triton",
                            feedback_lines: int = 40) -> list[dict[str, str]]:
    """Messages asking for one substantive change to a verified ``parent`` towards ``stage``'s goal."""
    gpu = _resolve_gpu(gpu)
    block = _attempt_block(parent, "The parent kernel", feedback_lines)
    instruction = stage_instruction(stage, arch=arch, gpu=gpu, best=parent)
    user = _user_message("mutation.md", problem_source=problem_source, problem_name=problem_name, arch=arch,
                         gpu=gpu, ceilings=ceilings, stage=stage, attempts=block, instruction=instruction)
    return [{"role": "system", "content": system_message(arch=arch, gpu=gpu, policy=policy, language=language)},
            {"role": "user", "content": user}]


def build_crossover_messages(a: Attempt, b: Attempt, *, problem_source: str, problem_name: str, arch: str,
                             gpu: GpuSpec | str | None = None, ceilings: Mapping[str, Any] | Any = None,
                             policy: Policy, stage: str, language: str = "triton",
                             feedback_lines: int = 30) -> list[dict[str, str]]:
    """Messages asking for one kernel that combines two verified parents ``a`` and ``b``."""
    gpu = _resolve_gpu(gpu)
    blocks = [_attempt_block(a, "Parent A", feedback_lines), _attempt_block(b, "Parent B", feedback_lines)]
    better = a if _faster(a, b) else b
    instruction = stage_instruction(stage, arch=arch, gpu=gpu, best=better)
    user = _user_message("crossover.md", problem_source=problem_source, problem_name=problem_name, arch=arch,
                         gpu=gpu, ceilings=ceilings, stage=stage, attempts="\n\n".join(blocks), instruction=instruction)
    return [{"role": "system", "content": system_message(arch=arch, gpu=gpu, policy=policy, language=language)},
            {"role": "user", "content": user}]


def _median_ms(attempt: Attempt) -> float:
    cand = attempt.verdict.median_ms() if attempt.verdict else None
    return float(cand) if cand else math.inf


def _faster(a: Attempt, b: Attempt) -> bool:
    return _median_ms(a) <= _median_ms(b)


def build_problem_messages(request: str) -> list[dict[str, str]]:
    """Messages asking for a KernelBench reference problem file for a plain-language ``request``."""
    return [{"role": "system", "content": render("problem_system.md")},
            {"role": "user", "content": render("problem_request.md", request=request.strip())}]
