"""``kernelwright inspect``: which instructions a candidate's kernels run, and what that says.

    kernelwright inspect my_matmul.py --problem problems/matmul.py --arch sm_90a [--json]
    kernelwright inspect kernel.cu --arch sm_80,sm_90a,sm_100a --dominant matmul --dtype float16
    kernelwright inspect build/my_ext.so          # a CUDA extension, a .cubin, a .fatbin, a .o or a .ptx file
    kernelwright inspect my_matmul.py --problem problems/matmul.py --executed      # GPU + Nsight Compute
    kernelwright inspect a.py --diff b.py --problem problems/matmul.py   # what changed in the SASS from A to B
    kernelwright inspect kernel.ptx --rewrite streaming-stores           # a PTX rewrite, assembled and diffed

Exit status: 0 when the inspection ran (whatever it found), 1 when the input did not compile, 2 for bad input or a
missing tool (one line naming the fix).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from kernelwright.errors import InputError

HELP = "show the instructions a candidate's kernels run (SASS classes, resources, occupancy) and findings"

BINARY_SUFFIXES = (".cubin", ".fatbin", ".o", ".so", ".bin")
CUDA_SUFFIXES = (".cu", ".cuh")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, help="candidate .py, CUDA .cu, .ptx, .cubin, .fatbin, .o or .so")
    parser.add_argument("--problem", type=Path, help="the KernelBench problem (needed for a .py candidate)")
    parser.add_argument("--arch", help="target arch(s), comma separated: sm_80,sm_90a,sm_100a (default: the local "
                        "GPU's, else $KERNELWRIGHT_ARCH; binaries: every arch they hold)")
    parser.add_argument("--kernel", help="only the kernel with this (mangled) name")
    parser.add_argument("--dominant", choices=("matmul", "conv", "attention", "memory"),
                        help="what bounds the problem, for findings on a binary or CUDA source")
    parser.add_argument("--dtype", help="the problem's compute dtype (float32, bfloat16, ...), for findings")
    parser.add_argument("--allow-tf32", action="store_true", help="TF32 MMAs are acceptable in an fp32 problem")
    parser.add_argument("--allow-reduced-precision", action="store_true",
                        help="fp16/bf16/fp8 MMAs are acceptable below the problem's precision")
    parser.add_argument("--threads", type=int, help="threads per block of the launch (for occupancy)")
    parser.add_argument("--torch-headers", action=argparse.BooleanOptionalAction, default=None,
                        help="compile a .cu with torch's headers (default: when it includes torch/)")
    parser.add_argument("--executed", action="store_true",
                        help="also run the candidate under Nsight Compute (GPU) and report executed counts")
    parser.add_argument("--opcodes", type=int, default=8, help="top opcodes to list per kernel (text output)")
    parser.add_argument("--rewrite", metavar="PASS[,PASS]",
                        help="a .ptx input: apply these PTX rewrites (no-allocate-loads, evict-first-loads, "
                             "evict-last-loads, streaming-stores), write the result (--out) and show the SASS diff")
    parser.add_argument("--out", type=Path, default=None, help="--rewrite: where to write the rewritten PTX "
                                                                "(default: beside the input, NAME.<pass>.ptx)")
    parser.add_argument("--diff", type=Path, metavar="B",
                        help="a second input inspected the same way: show what changed from the first to it "
                             "(registers, spills, shared memory, instruction classes and opcodes, kernel by kernel)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


# ------------------------------------------------------------------------------------------------ run


def run(args: argparse.Namespace) -> int:
    if args.rewrite:
        args.diff = _rewritten(args)
    if args.diff is not None:
        if args.executed:
            raise InputError("--diff compares the compiled code: leave out --executed")
        before, after = inspect_input(args, args.path), inspect_input(args, args.diff)
        changes = diff_reports(before, after)
        if args.json:
            print(json.dumps({"a": before, "b": after, "diff": changes}, indent=2, default=str))
        else:
            print(render_diff(before, after, changes, top_opcodes=args.opcodes))
        return 1 if any(not c.get("ok", True) for r in (before, after) for c in r["compile"]) else 0
    report = inspect_input(args, args.path)
    failed = any(not c.get("ok", True) for c in report["compile"])
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(render(report, top_opcodes=args.opcodes))
    return 1 if failed else 0


def _rewritten(args: argparse.Namespace) -> Path:
    """Apply ``--rewrite`` to the .ptx input; the rewritten file's path (inspected as ``--diff``)."""
    import sys

    from kernelwright.inspect.ptx_rewrite import rewrite_all

    if args.path.suffix.lower() != ".ptx" or not args.path.is_file():
        raise InputError(f"--rewrite takes a .ptx file ({args.path} is not one): dump a kernel's PTX first "
                         "(TRITON_KERNEL_DUMP=1, or nvcc -ptx)")
    names = [n.strip() for n in args.rewrite.split(",") if n.strip()]
    try:
        result = rewrite_all(args.path.read_text(), names)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    out = args.out or args.path.with_name(f"{args.path.stem}.{result.name}.ptx")
    out.write_text(result.ptx)
    print(f"{result.name}: {result.changed} instruction(s) rewritten, written to {out}"
          + "".join(f"\n  {a}\n  -> {b}" for a, b in result.examples), file=sys.stderr)
    return out


def inspect_input(args: argparse.Namespace, path: Path) -> dict[str, Any]:
    """The inspection report of ``path`` under ``args`` (arch, kernel, problem ...)."""
    if not path.exists():
        raise InputError(f"{path} does not exist")
    args = argparse.Namespace(**{**vars(args), "path": path})
    suffix = path.suffix.lower()
    if args.executed and suffix != ".py":
        raise InputError("--executed needs a .py candidate (with --problem) that kernelwright can run under ncu")
    report: dict[str, Any] = {"input": str(path), "kernels": [], "findings": [], "compile": []}
    if suffix == ".py":
        inspect_candidate = getattr(args, "inspect_candidate", None)  # verify/inspect_cli.py: the verifier runs it
        if inspect_candidate is None:
            raise InputError(f"{path.name}: a .py candidate is inspected by running it through the verifier; use "
                             "`kernelwright inspect` (kernelwright.verify.inspect_cli), or inspect a .cu, .ptx, "
                             ".cubin or .so")
        report |= inspect_candidate(args)
    elif suffix in CUDA_SUFFIXES or suffix == ".ptx":
        _inspect_source(args, report)
    elif suffix in BINARY_SUFFIXES or ".so." in path.name:
        _inspect_binary(args, report)
    else:
        raise InputError(f"cannot inspect {path.name}: expected a .py candidate, .cu, .ptx, .cubin, .fatbin, .o or .so")
    return report


# ------------------------------------------------------------------------------------------------ diff

_SCALARS = ("registers", "shared_bytes", "stack_bytes", "spill_store_bytes", "spill_load_bytes", "instruction_count")


def _pairs(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[tuple[dict | None, dict | None]]:
    """Kernels of A and B side by side, per arch: by name where the names match, else in launch order (a
    candidate's kernels are named after its groups, so two configurations of a problem usually match by name)."""
    pairs: list[tuple[dict | None, dict | None]] = []
    for arch in dict.fromkeys([k["arch"] for k in before] + [k["arch"] for k in after]):
        a = [k for k in before if k["arch"] == arch]
        b = [k for k in after if k["arch"] == arch]
        names = {k["name"] for k in b}
        for k in [k for k in a if k["name"] in names]:
            pairs.append((k, next(x for x in b if x["name"] == k["name"])))
        matched = {k["name"] for k in a if k["name"] in names}
        rest_a = [k for k in a if k["name"] not in matched]
        rest_b = [k for k in b if k["name"] not in matched]
        for i in range(max(len(rest_a), len(rest_b))):
            pairs.append((rest_a[i] if i < len(rest_a) else None, rest_b[i] if i < len(rest_b) else None))
    return pairs


def _delta(a: dict[str, int], b: dict[str, int]) -> dict[str, tuple[int, int]]:
    keys = dict.fromkeys([*a, *b])
    changed = {k: (a.get(k, 0), b.get(k, 0)) for k in keys if a.get(k, 0) != b.get(k, 0)}
    return dict(sorted(changed.items(), key=lambda kv: -abs(kv[1][1] - kv[1][0])))


def diff_reports(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """Per kernel pair: the resources that changed (before, after), the instruction classes and opcodes whose
    counts changed (largest change first), and the findings only one side has."""
    changes = []
    for a, b in _pairs(before.get("kernels", []), after.get("kernels", [])):
        entry: dict[str, Any] = {"arch": (a or b)["arch"], "a": a and a["name"], "b": b and b["name"]}
        if a is not None and b is not None:
            entry["resources"] = {k: (a.get(k), b.get(k)) for k in _SCALARS if a.get(k) != b.get(k)}
            entry["classes"] = _delta(a.get("histogram_by_class", {}), b.get("histogram_by_class", {}))
            entry["opcodes"] = _delta(a.get("histogram_by_opcode", {}), b.get("histogram_by_opcode", {}))
            entry["load_bits"] = _delta({str(k): v for k, v in a.get("global_load_bits", {}).items()},
                                        {str(k): v for k, v in b.get("global_load_bits", {}).items()})
            occ_a, occ_b = a.get("occupancy") or {}, b.get("occupancy") or {}
            if occ_a.get("warps_per_sm") != occ_b.get("warps_per_sm"):
                entry["resources"]["warps_per_sm"] = (occ_a.get("warps_per_sm"), occ_b.get("warps_per_sm"))
        changes.append(entry)
    codes_a = {f["code"] for f in before.get("findings", [])}
    codes_b = {f["code"] for f in after.get("findings", [])}
    if codes_a != codes_b:
        changes.append({"findings": {"only_a": sorted(codes_a - codes_b), "only_b": sorted(codes_b - codes_a)}})
    return changes


def render_diff(before: dict[str, Any], after: dict[str, Any], changes: list[dict[str, Any]], *,
                top_opcodes: int = 8) -> str:
    lines = [f"A {before['input']}", f"B {after['input']}"]
    for entry in changes:
        if "findings" in entry:
            f = entry["findings"]
            lines.append(f"findings    only in A: {', '.join(f['only_a']) or '-'}; only in B: "
                         f"{', '.join(f['only_b']) or '-'}")
            continue
        if entry["a"] is None or entry["b"] is None:
            side, name = ("B", entry["b"]) if entry["a"] is None else ("A", entry["a"])
            lines.append(f"{name}  {entry['arch']}: only in {side}")
            continue
        title = entry["a"] if entry["a"] == entry["b"] else f"{entry['a']} -> {entry['b']}"
        lines.append(f"{title}  {entry['arch']}")
        res = entry["resources"]
        lines.append("  resources   " + (", ".join(f"{k} {x} -> {y}" for k, (x, y) in res.items()) or "unchanged"))
        for label, key in (("classes", "classes"), ("opcodes", "opcodes"), ("loads", "load_bits")):
            items = list(entry[key].items())[:top_opcodes]
            text = ", ".join(f"{k} {x} -> {y} ({y - x:+d})" for k, (x, y) in items)
            lines.append(f"  {label:<11} {text or 'unchanged'}")
    if not changes:
        lines.append("no kernels to compare")
    return "\n".join(lines)


def requested_archs(args: argparse.Namespace, *, default_from_gpu: bool = True) -> list[str]:
    from kernelwright.hardware.spec import canonical_arch, known_archs

    if args.arch:
        return known_archs(args.arch)
    if default_from_gpu:
        from kernelwright.hardware.local import local_gpu

        gpu = local_gpu()
        if gpu is not None:
            return [gpu.arch]
    from kernelwright.config import config

    return [canonical_arch(config.arch)]


def traits(args: argparse.Namespace) -> Any:
    from kernelwright.records import Policy, ProblemTraits

    return ProblemTraits(
        dominant=args.dominant or "unknown",
        compute_dtype=args.dtype,
        policy=Policy(allow_tf32=args.allow_tf32, allow_reduced_precision=args.allow_reduced_precision),
    )


def _evaluate(summaries: list[Any], args: argparse.Namespace, arch: str) -> list[dict[str, Any]]:
    """Findings for one arch's kernels; each names its arch (the details, and the message when several archs are
    inspected at once, so that the same finding on two archs reads as two)."""
    from kernelwright.inspect.expectations import evaluate

    several = bool(args.arch and "," in args.arch) or len({s.arch for s in summaries}) > 1
    found = []
    for f in evaluate(summaries, traits(args), arch):
        data = f.to_json()
        data["details"] = {**(data.get("details") or {}), "arch": arch}
        if several:
            data["message"] = f"[{arch}] {data['message']}"
        found.append(data)
    return found


def _inspect_binary(args: argparse.Namespace, report: dict[str, Any]) -> None:
    from kernelwright.inspect.analysis import analyze_binary

    archs = requested_archs(args, default_from_gpu=False) if args.arch else [None]
    for arch in archs:
        summaries = analyze_binary(args.path, arch=arch, name=args.kernel)
        if args.threads:
            summaries = [_with_threads(s, args.threads) for s in summaries]
        report["kernels"] += [s.to_json() for s in summaries]
        several = len({s.arch for s in summaries}) > 1
        for kernel_arch in sorted({s.arch for s in summaries}):
            found = _evaluate([s for s in summaries if s.arch == kernel_arch], args, kernel_arch)
            if several and not (args.arch and "," in args.arch):
                found = [{**f, "message": f"[{kernel_arch}] {f['message']}"} for f in found]
            report["findings"] += found
    if not report["kernels"]:
        raise InputError(f"{args.path.name} holds no SASS kernels{' for ' + args.arch if args.arch else ''} "
                         "(only PTX, or no device code); inspect it with --arch after compiling")


def _with_threads(summary: Any, threads: int) -> Any:
    from dataclasses import replace

    from kernelwright.inspect.analysis import occupancy_at

    occupancy = occupancy_at(summary.arch, threads, summary.registers, summary.shared_bytes)
    return replace(summary, threads_per_block=threads, threads_source="launch", occupancy=occupancy)


def _inspect_source(args: argparse.Namespace, report: dict[str, Any]) -> None:
    from kernelwright.inspect.analysis import analyze_cubin
    from kernelwright.inspect.cuda_compile import compile_cuda, compile_ptx

    text = args.path.read_text()
    is_ptx = args.path.suffix.lower() == ".ptx"
    if is_ptx and not args.arch:
        target = re.search(r"^\s*\.target\s+(sm_\w+)", text, re.M)
        archs = [target.group(1)] if target else requested_archs(args)
    else:
        archs = requested_archs(args)
    torch_headers = args.torch_headers if args.torch_headers is not None else bool(re.search(r"#\s*include\s*[<\"]"
                                                                                           r"(torch|ATen|c10)/", text))
    for arch in archs:
        if is_ptx:
            result = compile_ptx(text, arch)
        else:
            result = compile_cuda(text, arch=arch, torch_headers=torch_headers)
        report["compile"].append(result.to_json())
        if not result.ok:
            continue
        summaries = analyze_cubin(result.cubin, arch=arch, name=args.kernel, ptxas_log=result.full_log,
                                  ptx=result.ptx, threads_per_block=args.threads,
                                  origin="ptx" if is_ptx else "cuda")
        report["kernels"] += [s.to_json() for s in summaries]
        report["findings"] += _evaluate(summaries, args, arch)


# ------------------------------------------------------------------------------------------------ text


def _kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} B"


def render(report: dict[str, Any], *, top_opcodes: int = 8) -> str:
    lines: list[str] = []
    sizes = (report.get("verdict") or {}).get("size_overrides")
    if sizes:
        lines.append("kernels as launched at reduced sizes (no GPU: the interpreter ran the candidate), "
                     + ", ".join(f"{k}={v}" for k, v in sizes.items()))
    for result in report.get("compile", []):
        status = "compiled" if result["ok"] else "FAILED to compile"
        lines.append(f"{report['input']}: {status} for {result['arch']} in {result['seconds']:.1f} s"
                     + (" (cached)" if result.get("cached") else ""))
        if result.get("log"):
            lines += ["  " + line for line in result["log"].splitlines()]
    for k in report.get("kernels", []):
        lines.append(f"{k['name']}  {k['arch']}  ({k['origin']}, {k['tool']})")
        spills = (f"spills {k['spill_store_bytes']}/{k['spill_load_bytes']} B" if k["spill_store_bytes"] is not None
                  else f"local {k['histogram_by_class'].get('local', 0)} instr")
        lines.append(f"  resources   {k['registers']} registers, {_kib(k['shared_bytes'])} shared, "
                     f"{k['stack_bytes']} B stack, {spills}")
        occ = k.get("occupancy")
        if occ:
            source = {"launch": "", "launch_bounds": " (launch bounds)", "max_launchable": " (largest launchable)"}
            lines.append(f"  occupancy   {k['threads_per_block']} threads{source.get(k['threads_source'], '')}: "
                         + ("cannot launch: " + "; ".join(occ["problems"]) if occ["problems"] else
                            f"{occ['blocks_per_sm']} blocks/SM, {occ['warps_per_sm']}/{occ['max_warps_per_sm']} "
                            f"warps ({occ['occupancy']:.0%}), limited by {occ['limiting']}"))
        mma = [f"{op} x{n}" for op, n in k["histogram_by_opcode"].items()
               if op.split(".")[0] in ("HMMA", "IMMA", "DMMA", "QMMA", "HGMMA", "QGMMA", "IGMMA", "BGMMA")
               or (op.startswith("UTC") and op.split(".")[0].endswith("MMA"))]
        types = ", ".join(f"{t} {n}" for t, n in k["mma_types"].items())
        ptx_types = ", ".join(f"{t} {n}" for t, n in k["ptx_mma_types"].items())
        lines.append("  tensor core " + (f"{', '.join(mma[:4])}  [operands: {types}"
                                          + (f"; PTX: {ptx_types}" if ptx_types else "") + "]" if mma else "none"))
        loads = ", ".join(f"{b}-bit x{n}" for b, n in k["global_load_bits"].items()) or "none"
        stores = ", ".join(f"{b}-bit x{n}" for b, n in k["global_store_bits"].items()) or "none"
        async_copies = {op: n for op, n in k["histogram_by_opcode"].items() if op.startswith("LDGSTS")}
        tma = k["histogram_by_class"].get("tma", 0)
        extra = "".join([f"; cp.async {', '.join(f'{op} x{n}' for op, n in async_copies.items())}"
                         if async_copies else "", f"; TMA {tma}" if tma else ""])
        lines.append(f"  global      loads {loads}; stores {stores}{extra}")
        if k["distinctive"]:
            marks = ", ".join(f"{c} {'yes' if used else 'no'}" for c, used in k["distinctive"].items())
            lines.append(f"  {k['arch']} features used {k['utilisation']}: {marks}")
        classes = ", ".join(f"{c} {n}" for c, n in k["histogram_by_class"].items())
        lines.append(f"  classes     {classes}  ({k['instruction_count']} instructions)")
        top = ", ".join(f"{op} {n}" for op, n in list(k["histogram_by_opcode"].items())[:top_opcodes])
        lines.append(f"  opcodes     {top}")
        for warning in k.get("ptxas_warnings", []):
            lines.append(f"  ptxas       {warning['message']}")
    executed = report.get("executed")
    if executed:
        lines.append("executed (Nsight Compute):")
        for k in executed["kernels"]:
            def fmt(value: Any, spec: str = ".0f") -> str:
                return "-" if value is None else format(value, spec)
            per_us = k.get("duration_ns_per_launch")
            lines.append(f"  {k['name']}: {k['launches']} launch(es), {fmt(per_us and per_us / 1e3, '.1f')} us and "
                         f"{fmt(k.get('dram_bytes_per_launch'))} B of DRAM a launch, tensor instr "
                         f"{fmt(k['tensor_instructions'])}, tensor pipe {fmt(k['tensor_pipe_pct'], '.1f')}%, "
                         f"L1 hit {fmt(k['l1_hit_pct'], '.0f')}%, L2 hit {fmt(k['l2_hit_pct'], '.0f')}%, "
                         f"occupancy {fmt(k['achieved_occupancy_pct'], '.0f')}%, spills {fmt(k['spill_instructions'])}")
            hot = ", ".join(f"{op} {n:.0f}" for op, n in k["hottest_opcodes"][:5])
            if hot:
                lines.append(f"    hottest: {hot}")
        report = {**report, "findings": [*report.get("findings", []), *executed["findings"]]}
    findings = report.get("findings", [])
    if findings:
        lines.append("findings:")
        lines += [f"  {f['severity']:<7} {f['code']}: {f['message']}" for f in findings]
    elif report.get("kernels"):
        lines.append("findings: none")
    return "\n".join(lines)
