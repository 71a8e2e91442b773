"""ptxas -v logs: resources, spills and C75xx messages."""

from __future__ import annotations

from kernelwright.inspect.ptxas import parse_ptxas_log, relevant_lines

LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'mm' for 'sm_80'
ptxas info    : Function properties for mm
    288 bytes stack frame, 48 bytes spill stores, 40 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 32776 bytes smem, 400 bytes cmem[0]
ptxas info    : Compiling entry function 'wg' for 'sm_90a'
ptxas info    : Function properties for helper
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Function properties for wg
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 90 registers, used 0 barriers
ptxas-blackwell info    : (C7520) Potential Performance Loss: wgmma.mma_async instructions are serialized due to \
program dependence on compiler-inserted WG.AR in divergent path in the function 'wg'
ptxas info    : (C7517) warpgroup.wait is injected in around line 20 by compiler to allow use of registers defined \
by GMMA in function 'wg'
ptxas info    : (C7508) Potential Performance Loss: setmaxnreg ignored; unable to determine register count at entry \
in the function 'wg'
ptxas info    : Compile time = 3.482 ms
"""


def test_resources_per_entry() -> None:
    log = parse_ptxas_log(LOG)
    mm = log.functions["mm"]
    assert (mm.arch, mm.registers, mm.barriers, mm.shared_bytes) == ("sm_80", 255, 1, 32776)
    assert (mm.stack_bytes, mm.spill_store_bytes, mm.spill_load_bytes) == (288, 48, 40)
    wg = log.functions["wg"]
    assert (wg.registers, wg.spill_store_bytes, wg.shared_bytes) == (90, 0, None)
    assert log.functions["helper"].stack_bytes == 16  # a device function's frame is kept apart


def test_warnings_are_classified_by_text_and_attributed() -> None:
    log = parse_ptxas_log(LOG)
    kinds = [(w.code, w.kind, w.function) for w in log.warnings]
    assert kinds == [("C7520", "wgmma-serialized", "wg"), ("C7517", "wgmma-wait-injected", "wg"),
                     ("C7508", "setmaxnreg-ignored", "wg")]
    _, for_mm = log.for_function("mm")
    assert for_mm == ()
    assert "Potential Performance Loss" in log.warnings[0].message


def test_relevant_lines_keep_errors_and_coded_messages() -> None:
    text = LOG + "kernel.cu(3): error: identifier \"x\" is undefined\n"
    kept = relevant_lines(text).splitlines()
    assert len(kept) == 4 and kept[-1].startswith("kernel.cu(3): error")
