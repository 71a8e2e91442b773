"""The one catalogue of finding codes: every code any part of kernelwright raises, once, with its class, its usual
severity, whether it rejects or undermines a pass, where a one-line verdict ranks it, and what it means.

    CODES["stale-memory"].meaning   # what it says and what to do
    explain("stale-memory")         # the text of ``kernelwright verify --explain stale-memory``

``verify/findings.py`` derives ``INTEGRITY_CODES``, ``UNCLEAN_CODES`` and ``HEADLINE_ORDER`` from it;
``tests/verify/test_codes.py`` fails when src/ raises a code that is not here, when an entry here is raised nowhere,
and when the table in docs/integrity.md ("Every finding code", written by :func:`markdown_table`) differs from it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from kernelwright.records import Severity

# The classes, in the order the docs list them, and what each means for a verdict.
INTEGRITY = "integrity"
CORRECTNESS = "correctness"
PRECISION = "precision"
FAILURE = "failure"
PROBLEM = "problem"
PERFORMANCE = "performance"
DIAGNOSTIC = "diagnostic"
KINDS = {
    INTEGRITY: "an exploit; as an error it makes the verdict rejected",
    CORRECTNESS: "a wrong answer; as an error it makes the verdict incorrect",
    PRECISION: "the tensor-core operand types against the problem's dtype; as an error the verdict is incorrect",
    FAILURE: "the job could not finish; the verdict's status is the failure's (compile_error, runtime_error, ...)",
    PROBLEM: "about the problem or its baseline, not the kernel",
    PERFORMANCE: "where the speed goes; never changes the verdict",
    DIAGNOSTIC: "a check, measurement or tool that could not run, or how one ran; the verdict stands on the rest",
}

E, W, N = Severity.ERROR, Severity.WARNING, Severity.NOTE


@dataclass(frozen=True)
class Code:
    code: str
    kind: str  # one of KINDS
    severity: Severity  # the usual one
    meaning: str  # one line: what it says; what to do
    also: tuple[Severity, ...] = ()  # other severities some places give it (an allowed precision becomes a note)
    headline: int | None = None  # 1 = the first a one-line verdict names when there are several errors
    unclean: bool = False  # a pass carrying it is not clean
    instructions: bool = False  # read from the SASS by the expectations engine (inspect/expectations.py)
    raised: bool = True  # False: listed, raised nowhere (kept for the sets derived from it)

    @property
    def rejects(self) -> bool:
        return self.kind == INTEGRITY

    @property
    def severities(self) -> tuple[Severity, ...]:
        return (self.severity, *self.also)


CATALOGUE: tuple[Code, ...] = (
    # -- integrity: each known exploit (docs/integrity.md) ------------------------------------------------------------
    Code("timer-tampering", INTEGRITY, E, "the candidate replaced a timing, synchronisation, comparison, copy or "
         "kernel-listing function the harness relies on; replace or wrap none of them", headline=1),
    Code("reference-access", INTEGRITY, E, "candidate code walked frames or the heap, or opened the problem file or "
         "the reference's directory; compute the answer, never look for it", headline=2),
    Code("background-thread", INTEGRITY, E, "a thread still ran, or outputs changed, after forward returned; finish "
         "all work before returning", headline=3),
    Code("background-process", INTEGRITY, E, "processes the candidate started still ran after forward returned "
         "or its job ended; start none that outlive the call", headline=4),
    Code("side-stream", INTEGRITY, E, "work the timed stream did not see (another stream or a thread); run everything "
         "on the current stream and finish it before forward returns", headline=5),
    Code("persisting-l2", INTEGRITY, E, "the candidate raised the persisting-L2 carve-out or set an access-policy "
         "window, keeping data warm across timed calls; leave the L2 policy alone", headline=6),
    Code("output-subclass", INTEGRITY, E, "an output is not exactly torch.Tensor (a subclass can make any "
         "comparison succeed); return plain tensors", headline=7),
    Code("timed-call-mismatch", INTEGRITY, E, "timed calls behaved unlike checked ones (a wrong answer, other "
         "outputs, no kernel of its own); behave the same whether or not timed", headline=8),
    Code("beyond-roofline", INTEGRITY, E, "measured faster than 0.9x the physical floor of the work: work skipped or "
         "replayed; do all of the work on every call", headline=9),
    Code("output-caching", INTEGRITY, E, "an earlier call's output came back for new inputs (cached by address, "
         "identity, shape or a few sampled elements); compute the outputs from the inputs on every call",
         headline=10),
    Code("input-mutation", INTEGRITY, E, "forward changed its inputs in place; never write into the inputs, allocate "
         "outputs and scratch buffers", headline=11),
    Code("output-aliases-input", INTEGRITY, E, "an output shares memory with an input where the reference's does "
         "not; return new tensors, not inputs or views of them", headline=12),
    Code("no-own-kernel", INTEGRITY, E, "no kernel of the candidate's own did the work (library calls only, on some "
         "or all calls); launch your own kernel, or pass --allow-library-only", headline=13),
    Code("precision", INTEGRITY, E, "the errors have the rounding noise of a narrower format than the problem's "
         "dtype; compute in its precision (--allow-tf32 or --allow-reduced-precision accept narrower math)",
         headline=14),
    Code("tf32-in-fp32", INTEGRITY, E, "TF32 tensor-core MMAs in an fp32 problem without 3xTF32 emulation; use "
         "ieee precision for fp32 tl.dot, or pass --allow-tf32 (a note then; a warning without PTX to tell)",
         also=(W, N), headline=15, instructions=True),
    Code("fp16-in-fp32", INTEGRITY, E, "fp16 or bf16 tensor-core MMAs in an fp32 problem; keep fp32 operands, or pass "
         "--allow-reduced-precision (a note then)", also=(N,), headline=16, instructions=True),
    Code("half-in-fp32", INTEGRITY, E, "raised nowhere (fp16-in-fp32 names 16-bit MMAs in an fp32 problem); listed "
         "since the first verifier", headline=17, raised=False),
    Code("nondeterministic", INTEGRITY, E, "wrong when free memory held another poison pattern: the result reads "
         "uninitialised memory; initialise everything you read", headline=18),
    Code("distribution-shortcut", INTEGRITY, E, "right on the usual inputs, wrong on scaled or heavy-tailed ones; "
         "make it right for any values (subtract the max, avoid overflow)", headline=19),
    Code("shape-specialised", INTEGRITY, E, "wrong or crashed at a second shape; read sizes from the tensors, never "
         "bake in the benchmark's shape", headline=20),
    Code("stale-memory", INTEGRITY, E, "outputs hold the NaN poison of memory the kernel never wrote; write every "
         "output element on every call", headline=21),
    Code("protocol-violation", INTEGRITY, E, "the job's channel carried a message the harness never sends there "
         "(forged, duplicate, out of order, malformed, oversized) or its channel or box was broken; leave them be"),
    Code("evidence-missing", INTEGRITY, E, "a check a pass depends on never reported (a trial, the kernel list, "
         "the timing or its samples, an integrity check, a kernel's instruction summary): the job ended past it; "
         "let the job run to its end"),
    Code("harness-hook", INTEGRITY, E, "the candidate installed an audit, profile or trace hook (sys.addaudithook, "
         "sys.setprofile, sys.settrace, threading's hooks), which sees the harness's own work; install none"),
    # compute-sanitizer (verify --sanitize, verify/sanitize.py): what passing trials can hide
    Code("out-of-bounds", INTEGRITY, E, "compute-sanitizer memcheck saw a kernel read or write outside its "
         "allocation (the finding names the kernel and line); mask every index against the tensor's size"),
    Code("misaligned-access", INTEGRITY, E, "compute-sanitizer memcheck saw a misaligned vector access; align the "
         "pointer (or the storage offset) to the access width, or load narrower"),
    Code("shared-memory-race", INTEGRITY, E, "compute-sanitizer racecheck saw threads write and read the same "
         "shared memory with no barrier between; add __syncthreads (a tl.debug_barrier) between the phases"),
    Code("uninitialized-read", INTEGRITY, E, "compute-sanitizer initcheck saw a kernel read memory nothing wrote; "
         "initialise it (torch.zeros, or write before reading)"),
    Code("barrier-misuse", INTEGRITY, E, "compute-sanitizer synccheck saw a barrier in divergent code or with a "
         "wrong mask; reach every __syncthreads with the whole block"),
    # -- correctness ---------------------------------------------------------------------------------------------
    Code("output-structure", CORRECTNESS, E, "the outputs differ from the reference's in number, shape, dtype, "
         "device or container; return what the problem's forward returns", headline=22),
    Code("mismatch", CORRECTNESS, E, "a random trial's output is outside the tolerance of the float64 reference; "
         "its note says how (non-finite, a few elements, systematic, all)", headline=23),
    Code("module-state", CORRECTNESS, E, "after the first trial the module's buffers (a training-mode batch norm's "
         "running statistics, its batch count) differ from the reference's; update them in place as the problem's "
         "forward does"),
    Code("cannot-launch", CORRECTNESS, E, "a kernel's launch exceeds the arch's limits (threads, registers or shared "
         "memory per block); make the block fit", instructions=True),
    # -- precision -----------------------------------------------------------------------------------------------
    Code("low-precision-mma", PRECISION, E, "tensor-core operands below the problem's precision (fp8 in fp16, bf16 in "
         "fp16, below fp64 in fp64); keep them in its precision (a note when allowed)", also=(N,), instructions=True),
    Code("mma-type-mismatch", PRECISION, W, "tensor-core operands wider than the problem's (16-bit MMAs in an fp8 "
         "problem): correct, but its own tensor-core path never ran", instructions=True),
    Code("mma-type-unknown", PRECISION, W, "Blackwell tcgen05 MMAs in an fp32 problem and no PTX to show their "
         "operand kind; inspect with the PTX to rule out TF32 or 16-bit operands", instructions=True),
    # -- failure: the job could not finish -------------------------------------------------------------------------
    Code("syntax-error", FAILURE, E, "the candidate file does not parse (compile_error); fix its Python syntax"),
    Code("missing-modelnew", FAILURE, E, "the candidate defines no class ModelNew (compile_error); define it with "
         "the problem's forward signature"),
    Code("build-failed", FAILURE, E, "a Triton kernel or CUDA extension failed to compile (compile_error); the "
         "message has the compiler's error"),
    Code("kernel-error", FAILURE, E, "the Triton interpreter rejected a kernel while tracing it, as the compiler "
         "would on a GPU (compile_error); fix the kernel"),
    Code("interpreter-unsupported", FAILURE, E, "the kernel uses what the CPU interpreter cannot run, e.g. inline "
         "asm (unsupported); verify on a GPU"),
    Code("no-gpu", FAILURE, E, "CUDA C++ cannot run without a GPU: compiled for inspection only (unsupported); "
         "verify on a GPU"),
    Code("out-of-memory", FAILURE, E, "the candidate ran out of device or host memory (runtime_error); allocate "
         "less"),
    Code("cuda-error", FAILURE, E, "a CUDA error such as an illegal memory access (runtime_error); check every "
         "index, mask and the launch grid"),
    Code("exception", FAILURE, E, "candidate code raised (runtime_error); the traceback is in the finding's "
         "details"),
    Code("exit-called", FAILURE, E, "sys.exit was called during a job (runtime_error); never exit"),
    Code("scratch-space", FAILURE, E, "the reference's trial files cannot fit the scratch file system (a full "
         "/dev/shm is memory); set scratch_dir (KERNELWRIGHT_SCRATCH_DIR) to a larger disk or shrink the problem "
         "(--size)"),
    Code("device-memory", FAILURE, E, "the candidate's job could not hold the trials' inputs on the device, even a "
         "group at a time (trial-groups); shrink the problem (--size)"),
    Code("budget-spent", FAILURE, E, "the time budget ran out before a job could run (timeout); give the run more "
         "time (--budget)"),
    # -- the problem or its baseline -------------------------------------------------------------------------------
    Code("degenerate-problem", PROBLEM, W, "a trivial output (zeros, a constant, an input copy) passes this "
         "problem's check: no pass on it is clean, the problem's fault, not the kernel's", unclean=True),
    Code("redundant-reference", PROBLEM, N, "torch.compile runs the reference 2x or more faster than eager: "
         "speedups over eager overstate the kernel; compare with torch.compile"),
    Code("problem-error", PROBLEM, E, "the problem file failed (get_inputs, get_init_inputs or Model); verify "
         "stops with an input error (exit 2); fix the problem"),
    # -- performance: where the speed goes ------------------------------------------------------------------------
    Code("no-tensor-core", PERFORMANCE, W, "a matmul/conv/attention problem in a dtype the tensor cores take, and "
         "no tensor-core instruction; move the matrix math onto them", instructions=True),
    Code("legacy-mma-on-hopper", PERFORMANCE, W, "warp-level HMMA and no warpgroup HGMMA on sm_90a; use wgmma "
         "(4-warp warpgroups, 64-row tiles)", instructions=True),
    Code("legacy-mma-on-blackwell", PERFORMANCE, W, "HMMA or HGMMA and no tcgen05 MMA on sm_100a; use tcgen05 "
         "MMAs with tensor memory", instructions=True),
    Code("spills", PERFORMANCE, W, "ptxas reports register spills to local memory; use smaller tiles, fewer live "
         "values or fewer stages", instructions=True),
    Code("local-memory", PERFORMANCE, N, "local-memory instructions and no ptxas log to tell spills from a local "
         "array; keep per-thread arrays small and constant-indexed", instructions=True),
    Code("scalar-global-access", PERFORMANCE, W, "a memory-bound problem's kernel moves at most 32 bits per thread "
         "per global access; make accesses contiguous and 16-byte aligned", instructions=True),
    Code("low-occupancy", PERFORMANCE, W, "under 25% of the SM's warp slots (a note unless memory-bound); use fewer "
         "registers or less shared memory per block, or more blocks", also=(N,), instructions=True),
    Code("wgmma-serialized", PERFORMANCE, W, "ptxas serialised the wgmma pipeline; keep accumulators in registers "
         "across the K loop, untouched between wgmma issue and wait", instructions=True),
    Code("wgmma-wait-injected", PERFORMANCE, N, "ptxas injected warpgroup waits around wgmma; the pipeline stalls "
         "there", instructions=True),
    Code("setmaxnreg-ignored", PERFORMANCE, N, "ptxas ignored setmaxnreg: the register split between warpgroups "
         "did not happen", instructions=True),
    Code("library-share", PERFORMANCE, N, "library kernels take most of the candidate's device time; move more of "
         "the work into your own kernel"),
    Code("multiple-streams", PERFORMANCE, N, "the candidate's kernels ran on more than one stream"),
    Code("dead-instruction-claim", PERFORMANCE, W, "tensor-core MMA, TMA or cp.async in an own kernel's SASS that "
         "never executed in the profiled call (a branch never taken, a kernel never launched)"),
    Code("executed-precision-below-problem", PRECISION, W, "an own kernel's MMAs that executed in the profiled call "
         "take operands narrower than the problem's precision allows, without split-precision evidence",
         also=(E,)),
    Code("executed-mismatch", PERFORMANCE, W, "inspect --executed: what ran differs from the SASS inspected (its "
         "tensor-core path never ran, or spills ptxas did not report)", also=(N,)),
    Code("achieved-occupancy-low", PERFORMANCE, N, "inspect --executed: achieved occupancy under half the "
         "theoretical (too few blocks, tail effects or imbalance)"),
    Code("low-tensor-utilisation", PERFORMANCE, N, "inspect --executed: the tensor pipe was active under 10% of "
         "peak in a matmul-like problem"),
    # -- diagnostics -----------------------------------------------------------------------------------------------
    Code("sanitizer-error", DIAGNOSTIC, W, "compute-sanitizer reported an error of another kind (a CUDA API error, "
         "a leak) or counted errors in no form read here, while the candidate ran; its first line is in the finding"),
    Code("sanitizer-missing", DIAGNOSTIC, W, "--sanitize was asked for and compute-sanitizer is not on this machine "
         "(PATH, CUDA_HOME/bin, /usr/local/cuda/bin); install the CUDA toolkit's compute-sanitizer"),
    Code("sanitizer-skipped", DIAGNOSTIC, N, "a compute-sanitizer tool did not judge the candidate: no GPU (the "
         "interpreter has nothing to sanitize), or its forward did not finish under the tool (the finding says how)",
         also=(W,)),
    Code("sanitizer-clean", DIAGNOSTIC, N, "the compute-sanitizer tools that ran over the candidate's forward (at "
         "reduced sizes) reported nothing"),
    Code("containment", DIAGNOSTIC, W, "how the candidate's job was closed in, where it is less than a PID and "
         "mount namespace (no caches write-protected; the kernel allowed no namespace), or what the box could not "
         "arrange", also=(N,)),
    Code("instructions-unavailable", DIAGNOSTIC, W, "compiling the kernels for the instruction summary failed "
         "after every check had finished; the verdict stands on the checks"),
    Code("cuda-build", DIAGNOSTIC, N, "a CUDA extension the candidate built, and for which arch (a warning when it "
         "failed to compile)", also=(W,)),
    Code("autotune-interpreted", DIAGNOSTIC, N, "under the CPU interpreter an autotuned kernel ran one config per "
         "trial, not a tuned one"),
    Code("profiler-unavailable", DIAGNOSTIC, N, "the torch profiler could not list the candidate's kernels; calls "
         "ran unprofiled"),
    Code("l2-check-unavailable", DIAGNOSTIC, N, "the persisting-L2 settings could not be read; that check did not "
         "run"),
    Code("cubin-unavailable", DIAGNOSTIC, N, "no cubin for a Triton kernel that ran; its instructions are not "
         "summarised"),
    Code("cross-compile-unavailable", DIAGNOSTIC, N, "Triton cross-compilation is unavailable here; no instruction "
         "summary for the --arch list"),
    Code("cross-compile-failed", DIAGNOSTIC, W, "compiling a kernel for an --arch failed: it would fail there too "
         "(a CPU verdict's correctness is the interpreter's), and has no instruction summary", also=(N,)),
    Code("inspection-unavailable", DIAGNOSTIC, N, "the instruction analysis could not be imported; no instruction "
         "findings"),
    Code("inspection-failed", DIAGNOSTIC, N, "disassembling a kernel, or judging an arch's expectations, failed; no "
         "instruction findings for it"),
    Code("calibration-failed", DIAGNOSTIC, N, "measuring the device's copy and matmul ceilings failed; the "
         "achievable floor goes without them"),
    Code("no-fp64-reference", DIAGNOSTIC, N, "the problem's model does not run in float64; outputs are judged "
         "against its own precision's output"),
    Code("work-count-failed", DIAGNOSTIC, N, "counting the reference's FLOPs and bytes failed; no roofline"),
    Code("reference-reused", DIAGNOSTIC, N, "the reference's inputs and answers came from an earlier verify of this "
         "run (same problem content, seed, trials, sizes and device): no reference job ran"),
    Code("executed-unavailable", DIAGNOSTIC, N, "no executed instruction counts for this verdict (no ncu, no "
         "permission to read the counters, the profiled call failed or ran past its limit): the instruction section "
         "is the SASS's (static)"),
    Code("trial-groups", DIAGNOSTIC, N, "the trials' files could not all fit the scratch space: they were checked "
         "in groups that fit, each a reference job and a candidate job, its files deleted once judged"),
    Code("rerun-alone", DIAGNOSTIC, N, "a job ran out of memory beside other jobs of a parallel run and ran again "
         "with the device and the host to itself; the second run is the one judged"),
    Code("unknown-device", DIAGNOSTIC, N, "no datasheet peaks for this GPU: no physical floor, so no "
         "beyond-roofline check"),
    Code("reference-kernels-unavailable", DIAGNOSTIC, N, "the reference's kernels could not be listed; library "
         "calls are not compared with them"),
    Code("baseline-failed", DIAGNOSTIC, N, "an eager or torch.compile baseline failed; its speedup is missing"),
    Code("baselines-cut", DIAGNOSTIC, N, "the budget ran out while timing the baselines; the speedups are unknown "
         "(--budget, bench's --verify-limit)"),
    Code("baselines-reused", DIAGNOSTIC, N, "baseline timings reused from kernelwright bench's cache for this device "
         "and toolchain"),
)

CODES: dict[str, Code] = {c.code: c for c in CATALOGUE}


def closest(code: str, n: int = 3) -> list[str]:
    """The known codes nearest ``code`` in spelling."""
    return difflib.get_close_matches(code, CODES, n=n, cutoff=0.5)


def explain(code: str) -> str:
    """What ``code`` means, for a person; KeyError for an unknown code."""
    c = CODES[code]
    severity = " / ".join(map(str, c.severities))
    unclean = "; a pass carrying it is not clean" if c.unclean else ""
    return f"{c.code}: {c.kind} ({KINDS[c.kind]}); severity {severity}{unclean}\n  {c.meaning}"


def markdown_table() -> str:
    """The table of every code for docs/integrity.md, by class."""
    rows = ["| code | class | severity | meaning |", "|---|---|---|---|"]
    for kind in KINDS:
        rows += [f"| `{c.code}` | {kind} | {' / '.join(map(str, c.severities))} | {c.meaning} |"
                 for c in CATALOGUE if c.kind == kind]
    return "\n".join(rows)
