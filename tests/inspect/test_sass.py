"""Opcode classification and cuobjdump text parsing (no tools needed)."""

from __future__ import annotations

import pytest

from kernelwright.inspect import sass

# opcodes as cuobjdump prints them (GPU_FACTS.md and listings of sm_70 .. sm_120 cubins)
CLASSIFIED = {
    "HMMA.884.F32.F32.STEP0": "mma", "HMMA.16816.F32.BF16": "mma", "HMMA.1688.F32.TF32": "mma",
    "IMMA.16832.S8.S8.SAT": "mma", "DMMA.8x8x4": "mma", "QMMA.16832.F32.E4M3.E4M3": "mma",
    "HGMMA.64x128x16.F32.BF16": "wgmma", "QGMMA.64x64x32.F32.E4M3.E4M3": "wgmma", "IGMMA.64x64x32.S8.S8": "wgmma",
    "WARPGROUP.ARRIVE": "warpgroup", "WARPGROUP.DEPBAR.LE": "warpgroup",
    "UTCHMMA": "tcgen05", "UTCQMMA": "tcgen05", "UTCIMMA": "tcgen05", "UTCOMMA": "tcgen05",
    "UTCBAR": "tmem", "LDTM.x16": "tmem", "STTM.x32": "tmem", "UTCATOMSWS.AND": "tmem",
    "LDGSTS.E.BYPASS.LTC128B.128": "cp_async", "LDGDEPBAR": "cp_async", "DEPBAR.LE": "barrier",
    "UTMALDG.2D": "tma", "UTMASTG.2D": "tma", "UBLKCP.S.G": "tma", "SYNCS.ARRIVE.TRANS64.A1T0": "mbarrier",
    "LDG.E.128": "global_load", "LDG.E.CONSTANT": "global_load", "STG.E.128": "global_store",
    "LDS.128": "shared_load", "LDSM.16.M88.4": "ldmatrix", "STS.64": "shared_store", "STSM.16.M88.4": "stmatrix",
    "LDL.64": "local", "STL.128": "local", "LDC.64": "constant", "ULDC.64": "constant", "LDCU.64": "constant",
    "BAR.SYNC.DEFER_BLOCKING": "barrier", "SHFL.BFLY": "warp", "VOTE.ANY": "warp", "REDUX.SUM": "warp",
    "ELECT": "warp", "USETMAXREG.DEALLOC.CTAPOOL": "setmaxnreg", "VIMNMX.S32": "dpx", "VIADDMNMX": "dpx",
    "MUFU.EX2": "sfu", "F2FP.BF16.F32.PACK_AB": "convert", "I2F.U32": "convert", "FFMA": "fp32", "FADD2": "fp32",
    "HFMA2.MMA": "move", "HADD2.F32": "fp16", "DFMA": "fp64", "IMAD.WIDE.U32": "int", "UIADD3": "int",
    "ULOP3.LUT": "int", "LOP3.LUT": "int", "UMOV": "move", "S2R": "move", "SEL": "move", "BRA": "control",
    "EXIT": "control", "ATOMG.E.ADD.F32.FTZ.RN": "atomic", "RED.E.ADD": "atomic", "ATOMS.CAS": "atomic",
}


@pytest.mark.parametrize("opcode,cls", sorted(CLASSIFIED.items()))
def test_classify(opcode: str, cls: str) -> None:
    assert sass.classify(opcode) == cls
    assert cls in sass.CLASSES


def test_hfma2_mma_is_not_a_tensor_core_instruction() -> None:
    # Triton's fp32 ieee dot on sm_80 emits HFMA2.MMA (an FMA issued on the MMA pipe, used to move zeros)
    assert sass.classify("HFMA2.MMA") not in sass.TENSOR_CLASSES
    assert sass.mma_operand_type("HFMA2.MMA") is None


@pytest.mark.parametrize("opcode,kind", [
    ("HMMA.16816.F32", "fp16"), ("HMMA.16816.F16", "fp16"), ("HMMA.16816.F32.BF16", "bf16"),
    ("HMMA.1688.F32.TF32", "tf32"), ("HMMA.884.F32.F32.STEP2", "fp16"), ("HGMMA.64x64x16.F32", "fp16"),
    ("HGMMA.64x64x8.F32.TF32", "tf32"), ("HGMMA.64x256x16.F32.BF16", "bf16"), ("QGMMA.64x64x32.F32.E5M2.E4M3", "fp8"),
    ("IMMA.16832.S8.S8.SAT", "int8"), ("IGMMA.64x64x32.S8.S8", "int8"), ("DMMA.884", "fp64"),
    ("QMMA.16832.F32.E4M3.E4M3", "fp8"), ("UTCHMMA", "f16|bf16|tf32"), ("UTCQMMA", "fp8|fp6|fp4"),
    ("UTCIMMA", "int8"), ("FFMA", None), ("LDG.E.128", None),
])
def test_mma_operand_type(opcode: str, kind: str | None) -> None:
    assert sass.mma_operand_type(opcode) == kind


@pytest.mark.parametrize("opcode,bits", [
    ("LDG.E", 32), ("LDG.E.64", 64), ("LDG.E.128", 128), ("LDG.E.U16", 16), ("LDG.E.S8", 8),
    ("LDG.E.CONSTANT.128", 128), ("LDG.E.ENL2.256", 256), ("STG.E.U8", 8), ("STG.E.128", 128),
    ("LDGSTS.E.BYPASS.LTC128B.128", 128), ("LDGSTS.E", 32), ("LDG.E.LTC128B", 32), ("FFMA", None),
])
def test_access_bits(opcode: str, bits: int | None) -> None:
    assert sass.access_bits(opcode) == bits


LISTING = """
Fatbin elf code:
================
arch = sm_90a
code version = [1,8]

\tcode for sm_90a
\t\tFunction : _Z4copyPKfPfi
\t.headerflags\t@"EF_CUDA_ACCELERATORS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                  /* 0x00000a00ff017b82 */
                                                                          /* 0x000e220000000800 */
        /*0010*/                   S2R R0, SR_TID.X ;                      /* 0x0000000000007919 */
        /*0020*/              @!P0 LDG.E.128 R4, desc[UR4][R2.64] ;        /* 0x0000000402047981 */
        /*0030*/               @P1 BRA 0x70 ;                              /* 0x0000000000007947 */
        /*0040*/                   HGMMA.64x64x16.F32 R24, gdesc[UR4], RZ, !UPT ;  /* 0x0 */
        /*0050*/                   STG.E.128 desc[UR4][R2.64], R4 ;       /* 0x0000000402007986 */
        /*0060*/                   EXIT ;                                  /* 0x000000000000794d */
        /*0070*/                   BRA 0x70;                               /* 0xfffffffc00fc7947 */
        /*0080*/                   NOP;                                    /* 0x0000000000007918 */
        /*0090*/                   NOP;                                    /* 0x0000000000007918 */
\t\t..........
"""


def test_parse_sass_listing_strips_padding_and_keeps_predicates() -> None:
    functions = sass.parse_sass_listing(LISTING)
    [(key, instructions)] = functions.items()
    assert key == ("sm_90a", "_Z4copyPKfPfi")
    assert [i.opcode for i in instructions] == ["LDC", "S2R", "LDG.E.128", "BRA", "HGMMA.64x64x16.F32", "STG.E.128",
                                                "EXIT"]
    assert instructions[2].predicate == "@!P0" and instructions[2].offset == 0x20
    assert instructions[3].operands == "0x70"  # a real branch is kept, the self-branch padding is not


RES_USAGE = """
Fatbin elf code:
================
arch = sm_80
code version = [1,8]

Resource usage:
 Common:
  GLOBAL:0
 Function _Z5spillPfi:
  REG:32 STACK:256 SHARED:0 LOCAL:0 CONSTANT[0]:364 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function wmma_k:
  REG:22 STACK:0 SHARED:5120 LOCAL:0 CONSTANT[0]:376 TEXTURE:0 SURFACE:0 SAMPLER:0
"""


def test_parse_res_usage() -> None:
    usage = sass.parse_res_usage(RES_USAGE)
    assert usage[("sm_80", "_Z5spillPfi")] == sass.Resources(registers=32, stack_bytes=256, constant_bytes=364)
    assert usage[("sm_80", "wmma_k")].shared_bytes == 5120


ELF_DUMP = """
64-bit ELF: type=ET_EXEC, ABI=8, sm=90a, toolkit=13.0, flags=0x6005a04
Sections:
.nv.info._Z3lbkPf
\t<0x6>
\tAttribute:\tEIATTR_MAXREG_COUNT
\tFormat:\tEIFMT_HVAL
\tValue:\t0x80
\t<0x7>
\tAttribute:\tEIATTR_MAX_THREADS
\tFormat:\tEIFMT_SVAL
\tValue:\t0x100 0x1 0x1
.nv.info._Z5plainPf
\t<0x1>
\tAttribute:\tEIATTR_CUDA_API_VERSION
\tFormat:\tEIFMT_SVAL
\tValue:\t0x82
.section .strtab

64bit elf: type=2, abi=7, sm=70, toolkit=128, flags = 0x460546
.nv.info.k70
\tAttribute:\tEIATTR_REQNTID
\tFormat:\tEIFMT_SVAL
\tValue:\t0x20 0x4 0x1
"""


def test_parse_elf_dump_finds_archs_and_declared_block_sizes() -> None:
    info = sass.parse_elf_dump(ELF_DUMP)
    assert info.archs == ("sm_90a", "sm_70")
    assert info.max_threads == {("sm_90a", "_Z3lbkPf"): 256, ("sm_70", "k70"): 128}


def test_class_histogram_orders_by_class_list() -> None:
    hist = sass.class_histogram({"FFMA": 3, "HMMA.16816.F32": 2, "LDG.E.128": 1, "NOPE.X": 1})
    assert list(hist) == ["mma", "global_load", "fp32", "other"]
