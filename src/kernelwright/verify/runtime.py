"""Process set-up shared by the verifier's children: device, precision policy, synchronisation."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from kernelwright.records import Policy
from kernelwright.runtime.interpreter import interpret_requested


def configure_precision(policy: Policy) -> None:
    """The precision policy, applied identically to the reference, the baselines and the candidate.

    PyTorch enables TF32 for cuDNN convolutions by default; an fp32 problem must be judged and timed in fp32,
    so both switches follow ``policy.allow_tf32`` (protocol rule 4; integrity #10). Half precision is never
    switched on for PyTorch: it is what a candidate may use, not what the reference computes.
    """
    torch.backends.cuda.matmul.allow_tf32 = policy.allow_tf32
    torch.backends.cudnn.allow_tf32 = policy.allow_tf32
    torch.set_float32_matmul_precision("high" if policy.allow_tf32 else "highest")


def quiet_warnings() -> None:
    # Deterministic-mode and TF32 notices are expected in the children; keep stderr for real problems.
    warnings.filterwarnings("ignore", message=".*deterministic.*")
    warnings.filterwarnings("ignore", message=".*does not have a deterministic implementation.*")
    warnings.filterwarnings("ignore", category=UserWarning, module="torch")


def device_of(name: str) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("the verifier asked for CUDA, but this process sees no CUDA device")
    return torch.device("cuda", torch.cuda.current_device()) if name == "cuda" else torch.device("cpu")


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_facts(device: torch.device) -> dict[str, Any]:
    """What the verdict records about where it ran."""
    import platform

    facts: dict[str, Any] = {
        "type": device.type,
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
    try:
        import triton

        facts["triton"] = triton.__version__
    except ImportError:
        facts["triton"] = None
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        facts.update(
            name=props.name,
            compute_capability=f"{props.major}.{props.minor}",
            sm_count=props.multi_processor_count,
            l2_bytes=getattr(props, "L2_cache_size", None),
            memory_bytes=props.total_memory,
            cuda=torch.version.cuda,
        )
        try:
            facts["driver"] = torch.cuda.driver_version() if hasattr(torch.cuda, "driver_version") else None
        except Exception:
            facts["driver"] = None
    else:
        facts.update(name=platform.processor() or platform.machine(), interpreter=interpret_requested())
    return facts
