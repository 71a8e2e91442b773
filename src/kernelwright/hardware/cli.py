"""``kernelwright hw``: the local GPU or any known GPU, with its limits, peaks and measured ceilings.

    kernelwright hw                      # the local GPU (or "no GPU"), limits and cached measured ceilings
    kernelwright hw --calibrate          # measure copy bandwidth and matmul rates on the local GPU, then cache
    kernelwright hw H100 --json          # any known GPU
    kernelwright hw --list               # every GPU in the knowledge base
    kernelwright hw sm_90a --threads 256 --registers 128 --shared 64K    # occupancy of a launch configuration
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from kernelwright.errors import InputError

HELP = "show the local or a named GPU: limits, datasheet peaks, measured ceilings, occupancy"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("gpu", nargs="?", help="a GPU name (H100, 'NVIDIA H200', l40s) or an arch (sm_90a); "
                        "default: the local GPU")
    parser.add_argument("--list", action="store_true", help="list every GPU in the knowledge base")
    parser.add_argument("--calibrate", action="store_true",
                        help="measure copy bandwidth and matmul rates on the local GPU (cached; ~10 s)")
    parser.add_argument("--device", type=int, default=0, help="CUDA device index for the local GPU (default 0)")
    parser.add_argument("--threads", type=int, help="threads per block, for an occupancy estimate")
    parser.add_argument("--registers", type=int, default=0, help="registers per thread (with --threads)")
    parser.add_argument("--shared", default="0", help="shared memory per block in bytes, or 48K (with --threads)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def _parse_bytes(text: str) -> int:
    match = re.fullmatch(r"\s*(\d+)\s*([kKmM]?)(?:i?[bB])?\s*", text)
    if not match:
        raise InputError(f"--shared {text!r} is not a byte count; write e.g. 49152 or 48K")
    return int(match.group(1)) * {"": 1, "k": 1024, "m": 1024 * 1024}[match.group(2).lower()]


def run(args: argparse.Namespace) -> int:
    from kernelwright.hardware import spec as kb

    if args.list:
        gpus = kb.all_gpus()
        if args.json:
            print(json.dumps([g.to_json() for g in gpus], indent=2))
        else:
            print(_list_table(gpus))
        return 0

    report: dict[str, Any] = {}
    target_arch: str | None = None
    if args.threads is None and (args.registers or str(args.shared) not in ("0", "")):
        raise InputError("--registers and --shared describe a launch with --threads: add --threads N")
    if args.gpu and _looks_like_arch(args.gpu):
        arch = kb.arch_spec(args.gpu)
        report["arch"] = arch.to_json()
        target_arch = arch.name
        gpu = None
    elif args.gpu:
        gpu = kb.lookup(args.gpu)
    else:
        from kernelwright.hardware.local import local_gpu

        gpu = local_gpu(args.device)
        if gpu is None and (args.calibrate or args.threads is None):
            reason = _no_gpu_reason()
            if args.calibrate:
                raise InputError(f"--calibrate needs a local CUDA GPU; {reason}")
            if args.json:
                print(json.dumps({"gpu": None, "reason": reason}, indent=2))
            else:
                print(f"no GPU: {reason}\n(kernelwright hw NAME shows a known GPU; kernelwright hw --list lists them)")
            return 0

    if gpu is not None:
        report["gpu"] = gpu.to_json()
        report["arch"] = kb.arch_spec(gpu.arch).to_json()
        target_arch = gpu.arch
        report["ceilings"] = _ceilings(gpu, args)

    if args.threads is not None:
        from kernelwright.hardware.occupancy import occupancy

        target = gpu if gpu is not None else (target_arch or "sm_90a")
        report["occupancy"] = occupancy(
            target,
            threads_per_block=args.threads,
            registers_per_thread=args.registers,
            shared_bytes_per_block=_parse_bytes(args.shared),
        ).to_json()

    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(_render(report))
    return 0


def _looks_like_arch(text: str) -> bool:
    return bool(re.fullmatch(r"(?i)\s*(sm_?\d{2,3}[af]?|gfx\w+)\s*", text))


def _no_gpu_reason() -> str:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if torch.version.cuda is None and torch.version.hip is None:
        return f"torch {torch.__version__} is a CPU build"
    return "torch sees no CUDA device"


def _ceilings(gpu: Any, args: argparse.Namespace) -> dict[str, Any] | None:
    from kernelwright.hardware import calibration

    if not gpu.live:
        return None
    if args.calibrate:
        return calibration.measured_ceilings(args.device, refresh=True).to_json()
    cached = calibration.load_cached_ceilings(_device_name(args.device))
    return cached.to_json() if cached else None


def _device_name(index: int) -> str:
    import torch

    return torch.cuda.get_device_name(index)


# ----------------------------------------------------------------------------------------------------- text


def _list_table(gpus: list[Any]) -> str:
    rows = [("name", "arch", "SMs", "L2 MiB", "GB/s", "fp32", "tf32", "bf16", "fp8", "aliases")]
    for g in gpus:
        p = g.peak_tflops
        rows.append((
            g.name, g.arch, str(g.sm_count), f"{g.l2_bytes / 2**20:.0f}", f"{g.memory_bandwidth_gbs:.0f}",
            _num(p.get("fp32")), _num(p.get("tf32")), _num(p.get("bf16")), _num(p.get("fp8")),
            ", ".join(g.aliases[:3]),
        ))
    return _table(rows) + "\n(peaks: dense TFLOP/s from the datasheet; kernelwright hw NAME --json for sources)"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def _render(report: dict[str, Any]) -> str:
    lines: list[str] = []
    gpu, arch = report.get("gpu"), report.get("arch")
    if gpu:
        where = "local device" if gpu["live"] else "knowledge base"
        lines.append(f"{gpu['name']}  ({gpu['arch']}, {where})")
        cc = gpu["compute_capability"]
        lines.append(f"  compute capability  {cc[0]}.{cc[1]}" if cc else "  compute capability  - (AMD)")
        lines.append(f"  SMs                 {gpu['sm_count']}")
        lines.append(f"  memory              {gpu['memory_bytes'] / 1e9:.0f} GB at {gpu['memory_bandwidth_gbs']:g} GB/s")
        lines.append(f"  L2                  {gpu['l2_bytes'] / 2**20:g} MiB")
        if gpu["last_level_cache_bytes"] > gpu["l2_bytes"]:
            lines.append(f"  last-level cache    {gpu['last_level_cache_bytes'] / 2**20:g} MiB")
        lines.append(f"  boost clock         {gpu['boost_clock_mhz']:g} MHz")
        peaks = ", ".join(f"{k} {v:g}" for k, v in gpu["peak_tflops"].items()) or "unknown"
        lines.append(f"  dense peak TFLOP/s  {peaks}")
    if arch:
        if not gpu:
            lines.append(f"{arch['name']}  ({arch['family']})")
        lines.append(f"  threads             {arch['max_threads_per_block']} per block, "
                     f"{arch['max_threads_per_sm']} per SM, {arch['max_blocks_per_sm']} blocks per SM")
        lines.append(f"  registers           {arch['registers_per_sm']} per SM, "
                     f"{arch['max_registers_per_thread']} per thread")
        smem_sm = (gpu or arch)["shared_memory_per_sm_bytes"]
        optin = (gpu or arch)["shared_memory_per_block_optin_bytes"]
        lines.append(f"  shared memory       {smem_sm // 1024} KiB per SM, {optin // 1024} KiB per block (opt-in), "
                     f"{arch['shared_memory_per_block_bytes'] // 1024} KiB without opt-in")
        lines.append(f"  features            {', '.join(arch['features']) or '-'}")
    if gpu:
        lines.append(f"  source              {gpu['source']}")
    ceilings = report.get("ceilings")
    if gpu and gpu["live"]:
        if ceilings:
            rates = ", ".join(f"{k} {v:.0f}" for k, v in ceilings["matmul_tflops"].items())
            lines.append(f"  measured            copy {ceilings['copy_gbs']:.0f} GB/s; matmul TFLOP/s {rates} "
                         f"({ceilings['measured_at']})")
        else:
            lines.append("  measured            not yet (kernelwright hw --calibrate)")
    occ = report.get("occupancy")
    if occ:
        if occ["problems"]:
            lines.append("occupancy: cannot launch: " + "; ".join(occ["problems"]))
        else:
            lines.append(
                f"occupancy: {occ['blocks_per_sm']} blocks/SM, {occ['warps_per_sm']}/{occ['max_warps_per_sm']} warps "
                f"({occ['occupancy']:.0%}), limited by {occ['limiting']} "
                f"(blocks allowed: {', '.join(f'{k} {v}' for k, v in occ['limits'].items())})"
            )
    return "\n".join(lines)
