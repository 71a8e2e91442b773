"""CUDA C++ sources of the GEMM ``C = A @ B^T`` with a fused epilogue: A is ``[M, K]`` and B ``[N, K]``, both K-major
16-bit operands (bf16 or fp16) with 16-byte rows and K padded with zeros to a multiple of 16 (the launcher's
``k_major`` copy where they are not), fp32 accumulation, the epilogue computed per element on the accumulator and
each output rounded once at its store.

Two variants, each its own instruction set:

- ``mma_sync`` (sm_80 and later): a tile a CTA in grouped order, 8 warps (2 x 4), each warp ``BM/2 x BN/4`` of
  ``mma.sync.m16n8k16`` tiles; K steps of 32 staged through a ``STAGES``-deep ``cp.async`` ring (16-byte copies,
  zero-filled past M, N and K), fragments read with ``ldmatrix.x4`` from rows padded by 16 bytes (the eight rows an
  ``ldmatrix`` reads fall in distinct banks).
- ``wgmma`` (sm_90a): a persistent grid of one CTA an SM walking the tiles in grouped order; a producer warpgroup
  (``setmaxnreg.dec`` to 40 registers) whose one thread issues the TMA loads (``cp.async.bulk.tensor.2d``, 128-byte
  swizzle, K steps of 64) into a ``STAGES``-deep ring of shared-memory slots guarded by ``mbarrier`` pairs (full:
  expect-tx by the producer, completed by the copy; empty: arrived by every consumer thread), and two consumer
  warpgroups (``setmaxnreg.inc`` to 232) of 64 rows each issuing ``wgmma.mma_async.m64nBNk16`` on shared-memory
  descriptors, then the epilogue from the accumulator registers.

The host side of each encodes what it needs (the tensor maps through the driver's ``cuTensorMapEncodeTiled``, got
with ``cudaGetDriverEntryPointByVersion``: no link against libcuda) and launches on the caller's stream; a failed
launch raises with CUDA's error string.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch

VARIANTS = ("mma_sync", "wgmma")
# The archs each variant is built for (TORCH_CUDA_ARCH_LIST) and the arch it needs at least.
ARCH_LIST = {"mma_sync": "8.0;9.0", "wgmma": "9.0a"}
PTX_TYPE = {torch.bfloat16: "bf16", torch.float16: "f16"}
TMA_TYPE = {torch.bfloat16: "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", torch.float16: "CU_TENSOR_MAP_DATA_TYPE_FLOAT16"}


@dataclass(frozen=True)
class GemmSource:
    cpp: str  # the binding (host C++, torch's headers): run(...) fills the parameters and calls the launcher
    cuda: str  # kernels and launcher (no torch headers: nvcc compiles it alone in seconds)
    arch_list: str  # TORCH_CUDA_ARCH_LIST for the build


def _fill(text: str, **values: object) -> str:
    for key, value in values.items():
        text = text.replace(f"@{key}@", str(value))
    left = re.findall(r"@[A-Z_]+@", text)
    if left:
        raise ValueError(f"unfilled placeholders in a CUDA template: {sorted(set(left))}")
    return text


def params_struct(ident: str, pointers: Sequence[str], ints: Sequence[str]) -> str:
    fields = [f"  const void* {p};" if p.startswith("in_") else f"  void* {p};" for p in pointers]
    fields += [f"  long long {i};" for i in ints]
    return "\n".join([f"struct {ident}_Params {{", *fields, "  long long M, N;", "};"])


def params_fill(pointers: Sequence[str], ints: Sequence[str]) -> str:
    """C++ statements filling ``p`` from the launcher's ``pointers`` and ``ints`` vectors (their order is the
    fields')."""
    fill = [f"  p.{name} = reinterpret_cast<void*>(pointers[{i}]);" for i, name in enumerate(pointers)]
    fill += [f"  p.{name} = ints[{i}];" for i, name in enumerate(ints)]
    return "\n".join(fill)


_BINDING = """\
#include <torch/extension.h>
#include <vector>

@PARAMS@

void @ID@_launch(const void* a, const void* b, long long M, long long N, long long K, long long lda, long long ldb,
                 const @ID@_Params& p, int sms, void* stream);

// The launcher's arguments as integers (data pointers, sizes, strides: what the Python launcher computed from the
// tensors it keeps alive for the call), the kernel launched on the caller's stream.
void run(int64_t a, int64_t b, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
         std::vector<int64_t> pointers, std::vector<int64_t> ints, int64_t sms, int64_t stream) {
  TORCH_CHECK(pointers.size() == @NPTR@ && ints.size() == @NINT@, "@ID@: expected @NPTR@ pointers and @NINT@ integers");
  @ID@_Params p;
@FILL@
  p.M = M;
  p.N = N;
  @ID@_launch(reinterpret_cast<const void*>(a), reinterpret_cast<const void*>(b), M, N, K, lda, ldb, p,
              static_cast<int>(sms), reinterpret_cast<void*>(stream));
}
"""

_PRELUDE = """\
#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdexcept>
#include <string>

typedef @ELEM@ @ID@_elem;

@PARAMS@

@HELPERS@

// The group's epilogue at output element (m, n), acc the fp32 dot product: operands widened to fp32, one rounding
// at each output's store. Host code too: the CPU tests run it against PyTorch.
__host__ __device__ __forceinline__ void @ID@_epilogue(const @ID@_Params& p, long long m, long long n, float acc) {
@EPILOGUE@
}

static void @ID@_check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string("@ID@: ") + what + ": " + cudaGetErrorString(status));
  }
}

// The kernel's dynamic shared memory past 48 KiB, asked for once (per kernel: a template's static).
template <typename Kernel>
static void @ID@_opt_in(Kernel kernel, int smem) {
  static bool done = false;
  if (!done) {
    @ID@_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "shared memory opt-in");
    done = true;
  }
}

static long long @ID@_tiles(long long M, long long N, int bm, int bn) { return ((M + bm - 1) / bm) * ((N + bn - 1) / bn); }

// Grouped tile order: GROUP_M row blocks in a row walk the same column blocks of B (served from L2 to the rest).
__device__ __forceinline__ void @ID@_tile(long long t, long long tiles_m, long long tiles_n, long long& pm,
                                          long long& pn) {
  const long long in_group = @GROUP_M@LL * tiles_n;
  const long long first = (t / in_group) * @GROUP_M@LL;
  const long long size = (tiles_m - first) < @GROUP_M@LL ? (tiles_m - first) : @GROUP_M@LL;
  pm = first + (t % in_group) % size;
  pn = (t % in_group) / size;
}
"""

_MMA_SYNC = """\
namespace @ID@_k {
constexpr int BM = @BM@, BN = @BN@, BK = 32, STAGES = @STAGES@, WARPS_M = 2, WARPS_N = 4;
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N, MT = WM / 16, NT = WN / 8;
constexpr int LDS = BK + 8;  // a row padded by 16 bytes: the 8 rows one ldmatrix reads fall in distinct banks
constexpr int THREADS = 32 * WARPS_M * WARPS_N;
constexpr int SMEM = STAGES * (BM + BN) * LDS * 2;
static_assert(MT >= 1 && NT % 2 == 0, "the warp tile is whole m16 x n16 blocks");

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// rows x BK of a K-major operand into a stage: 16-byte cp.async copies, zero-filled past the matrix.
template <int ROWS>
__device__ __forceinline__ void load_stage(@ID@_elem* s, const @ID@_elem* g, long long rows, long long ld,
                                           long long row0, long long k0, long long K, int tid) {
  constexpr int CHUNKS = BK / 8;
#pragma unroll
  for (int c = tid; c < ROWS * CHUNKS; c += THREADS) {
    const int r = c / CHUNKS, kc = (c % CHUNKS) * 8;
    const bool valid = row0 + r < rows && k0 + kc < K;
    const @ID@_elem* src = valid ? g + (row0 + r) * ld + k0 + kc : g;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\\n"
                 :: "r"(smem_addr(s + r * LDS + kc)), "l"(src), "r"(valid ? 16 : 0));
  }
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}

__device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.@PTX@.@PTX@.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};\\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__global__ void __launch_bounds__(THREADS) kernel(const @ID@_elem* __restrict__ A, const @ID@_elem* __restrict__ B,
                                                   long long M, long long N, long long K, long long lda,
                                                   long long ldb, const @ID@_Params p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(16) unsigned char smem_raw[];
  @ID@_elem* sA = reinterpret_cast<@ID@_elem*>(smem_raw);
  @ID@_elem* sB = sA + STAGES * BM * LDS;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  long long pm, pn;
  @ID@_tile(blockIdx.x, (M + BM - 1) / BM, (N + BN - 1) / BN, pm, pn);
  const long long row0 = pm * BM, col0 = pn * BN;
  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
  const int KT = static_cast<int>((K + BK - 1) / BK);
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) {
      load_stage<BM>(sA + s * BM * LDS, A, M, lda, row0, (long long)s * BK, K, tid);
      load_stage<BN>(sB + s * BN * LDS, B, N, ldb, col0, (long long)s * BK, K, tid);
    }
    asm volatile("cp.async.commit_group;\\n" ::);
  }
  for (int kt = 0; kt < KT; ++kt) {
    asm volatile("cp.async.wait_group %0;\\n" :: "n"(STAGES - 2));
    __syncthreads();  // step kt has landed for every thread; the slot refilled below was read last iteration
    const int next = kt + STAGES - 1;
    if (next < KT) {
      const int s = next % STAGES;
      load_stage<BM>(sA + s * BM * LDS, A, M, lda, row0, (long long)next * BK, K, tid);
      load_stage<BN>(sB + s * BN * LDS, B, N, ldb, col0, (long long)next * BK, K, tid);
    }
    asm volatile("cp.async.commit_group;\\n" ::);
    const @ID@_elem* a_s = sA + (kt % STAGES) * BM * LDS;
    const @ID@_elem* b_s = sB + (kt % STAGES) * BN * LDS;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned af[MT][4], bf[NT][2];
#pragma unroll
      for (int i = 0; i < MT; ++i)  // rows 0-15 at k, then at k + 8: a0..a3 of the m16n8k16 fragment
        ldmatrix_x4(af[i], a_s + (wm * WM + i * 16 + lane % 16) * LDS + kk + (lane / 16) * 8);
#pragma unroll
      for (int j = 0; j < NT / 2; ++j) {  // two n8 tiles: (n 0-7, k), (n 0-7, k + 8), (n 8-15, k), (n 8-15, k + 8)
        unsigned t[4];
        ldmatrix_x4(t, b_s + (wn * WN + j * 16 + lane % 8 + (lane / 16) * 8) * LDS + kk + ((lane / 8) % 2) * 8);
        bf[2 * j][0] = t[0];
        bf[2 * j][1] = t[1];
        bf[2 * j + 1][0] = t[2];
        bf[2 * j + 1][1] = t[3];
      }
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) mma(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
  }
  asm volatile("cp.async.wait_group 0;\\n" ::);
  // The accumulator fragment: c0, c1 at (row g, columns 2q, 2q + 1), c2, c3 at row g + 8 (g = lane / 4, q = lane % 4).
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const long long m = row0 + wm * WM + i * 16 + lane / 4 + (e / 2) * 8;
        const long long n = col0 + wn * WN + j * 8 + (lane % 4) * 2 + e % 2;
        if (m < M && n < N) @ID@_epilogue(p, m, n, acc[i][j][e]);
      }
#endif
}
}  // namespace @ID@_k

void @ID@_launch(const void* a, const void* b, long long M, long long N, long long K, long long lda, long long ldb,
                 const @ID@_Params& p, int sms, void* stream) {
  (void)sms;
  const long long tiles = @ID@_tiles(M, N, @ID@_k::BM, @ID@_k::BN);
  if (tiles == 0) return;
  @ID@_opt_in(@ID@_k::kernel, @ID@_k::SMEM);
  @ID@_k::kernel<<<static_cast<unsigned>(tiles), @ID@_k::THREADS, @ID@_k::SMEM, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const @ID@_elem*>(a), static_cast<const @ID@_elem*>(b), M, N, K, lda, ldb, p);
  @ID@_check(cudaGetLastError(), "launch");
}
"""

_WGMMA = """\
namespace @ID@_k {
constexpr int BM = 128, BN = @BN@, BK = 64, STAGES = @STAGES@, CONSUMERS = 2;
constexpr int THREADS = 128 * (CONSUMERS + 1);
constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int SMEM = STAGES * STAGE_BYTES + 1024 + 2 * STAGES * 8;  // slots 1024-byte aligned, then the barriers
static_assert(BN % 16 == 0 && BN <= 256, "wgmma's N is a multiple of 16 up to 256; a TMA box at most 256 rows");

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// A K-major operand tile in shared memory, 128-byte swizzled (as the TMA wrote it): start address, leading byte
// offset 16 (unused with this swizzle), stride byte offset 1024 (eight 128-byte rows), layout 1 (128B swizzle).
__device__ __forceinline__ unsigned long long descriptor(const void* p) {
  const unsigned long long addr = smem_addr(p);
  return ((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((1024ull >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void bar_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\\n" :: "r"(smem_addr(bar)), "r"(count));
}

__device__ __forceinline__ void bar_expect_tx(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\\n" :: "r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void bar_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\\n" :: "r"(smem_addr(bar)) : "memory");
}

__device__ __forceinline__ void bar_wait(unsigned long long* bar, unsigned parity) {
  asm volatile(
      "{\\n"
      ".reg .pred ready;\\n"
      "WAIT:\\n"
      "mbarrier.try_wait.parity.shared::cta.b64 ready, [%0], %1;\\n"
      "@!ready bra WAIT;\\n"
      "}\\n" :: "r"(smem_addr(bar)), "r"(parity) : "memory");
}

__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, unsigned long long* bar, int k, int row) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\\n"
      :: "r"(smem_addr(dst)), "l"(reinterpret_cast<unsigned long long>(map)), "r"(smem_addr(bar)), "r"(k), "r"(row)
      : "memory");
}

__device__ __forceinline__ void wgmma(float (&d)[BN / 2], unsigned long long da, unsigned long long db, int scale_d) {
  asm volatile(
      "{\\n"
      ".reg .pred p;\\n"
      "setp.ne.b32 p, %@NSCALE@, 0;\\n"
      "wgmma.mma_async.sync.aligned.m64n@BN@k16.f32.@PTX@.@PTX@ {@DREGS@}, %@NDA@, %@NDB@, p, 1, 1, 0, 0;\\n"
      "}\\n"
      : @DOPS@
      : "l"(da), "l"(db), "r"(scale_d));
}

__global__ void __launch_bounds__(THREADS, 1) kernel(const __grid_constant__ CUtensorMap map_a,
                                                      const __grid_constant__ CUtensorMap map_b, long long M,
                                                      long long N, long long K, const @ID@_Params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* base = reinterpret_cast<unsigned char*>((reinterpret_cast<unsigned long long>(smem_raw) + 1023) &
                                                         ~1023ull);
  @ID@_elem* sA = reinterpret_cast<@ID@_elem*>(base);
  @ID@_elem* sB = reinterpret_cast<@ID@_elem*>(base + STAGES * A_BYTES);
  unsigned long long* full = reinterpret_cast<unsigned long long*>(base + STAGES * STAGE_BYTES);
  unsigned long long* empty = full + STAGES;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      bar_init(&full[s], 1);
      bar_init(&empty[s], CONSUMERS * 128);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");
  }
  __syncthreads();
  const long long tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN, tiles = tiles_m * tiles_n;
  const int KT = static_cast<int>((K + BK - 1) / BK);
  const int group = threadIdx.x / 128;
  if (group == 0) {  // the producer warpgroup: one thread issues every copy
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\\n");
    if (threadIdx.x == 0) {
      int it = 0;
      for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        long long pm, pn;
        @ID@_tile(t, tiles_m, tiles_n, pm, pn);
        for (int kt = 0; kt < KT; ++kt, ++it) {
          const int s = it % STAGES;
          if (it >= STAGES) bar_wait(&empty[s], ((it / STAGES) - 1) & 1);  // the slot's last use was consumed
          bar_expect_tx(&full[s], STAGE_BYTES);  // TMA counts a box's zero-filled part too
          tma_load(sA + s * (A_BYTES / 2), &map_a, &full[s], kt * BK, static_cast<int>(pm * BM));
          tma_load(sB + s * (B_BYTES / 2), &map_b, &full[s], kt * BK, static_cast<int>(pn * BN));
        }
      }
    }
  } else {  // a consumer warpgroup: rows 64 * (group - 1) of each tile
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\\n");
    const int c = group - 1, t_in = threadIdx.x % 128, w = t_in / 32, lane = t_in % 32;
    int it = 0;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
      long long pm, pn;
      @ID@_tile(t, tiles_m, tiles_n, pm, pn);
      float d[BN / 2];
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;
      for (int kt = 0; kt < KT; ++kt, ++it) {
        const int s = it % STAGES;
        bar_wait(&full[s], (it / STAGES) & 1);
        const @ID@_elem* a_s = sA + s * (A_BYTES / 2) + c * 64 * BK;
        const @ID@_elem* b_s = sB + s * (B_BYTES / 2);
        asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk)  // 16 elements = 32 bytes along the swizzled row: start address + 2
          wgmma(d, descriptor(a_s + kk * 16), descriptor(b_s + kk * 16), 1);
        asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\\n" ::: "memory");
        bar_arrive(&empty[s]);
      }
      // The accumulator of m64nBN: d[4j], d[4j+1] at (row 16w + lane/4, columns 8j + 2(lane%4) + 0, 1), d[4j+2],
      // d[4j+3] eight rows below.
      const long long row0 = pm * BM + c * 64 + w * 16 + lane / 4, col0 = pn * BN + (lane % 4) * 2;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const long long m = row0 + (e / 2) * 8, n = col0 + j * 8 + e % 2;
          if (m < M && n < N) @ID@_epilogue(p, m, n, d[4 * j + e]);
        }
    }
  }
#endif
}
}  // namespace @ID@_k

typedef CUresult (*@ID@_encode_fn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// A [rows, K] K-major operand as a 2-D tensor map: boxes of BK x box_rows, 128-byte swizzle, zero fill past the edges.
static CUtensorMap @ID@_map(const void* base, long long rows, long long K, long long ld, int box_rows) {
  static @ID@_encode_fn encode = nullptr;
  if (encode == nullptr) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    @ID@_check(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found),
               "cuTensorMapEncodeTiled lookup");
    if (fn == nullptr || found != cudaDriverEntryPointSuccess) throw std::runtime_error("@ID@: no cuTensorMapEncodeTiled");
    encode = reinterpret_cast<@ID@_encode_fn>(fn);
  }
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(K), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * 2};
  const cuuint32_t box[2] = {@ID@_k::BK, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t steps[2] = {1, 1};
  const CUresult status = encode(&map, @TMA_TYPE@, 2, const_cast<void*>(base), dims, strides, box, steps,
                                 CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS) {
    throw std::runtime_error("@ID@: cuTensorMapEncodeTiled failed (" + std::to_string(static_cast<int>(status)) +
                             "): rows must be 16-byte aligned");
  }
  return map;
}

void @ID@_launch(const void* a, const void* b, long long M, long long N, long long K, long long lda, long long ldb,
                 const @ID@_Params& p, int sms, void* stream) {
  const long long tiles = @ID@_tiles(M, N, @ID@_k::BM, @ID@_k::BN);
  if (tiles == 0) return;
  @ID@_opt_in(@ID@_k::kernel, @ID@_k::SMEM);
  const CUtensorMap map_a = @ID@_map(a, M, K, lda, @ID@_k::BM);
  const CUtensorMap map_b = @ID@_map(b, N, K, ldb, @ID@_k::BN);
  const unsigned grid = static_cast<unsigned>(tiles < sms ? tiles : sms);
  @ID@_k::kernel<<<grid, @ID@_k::THREADS, @ID@_k::SMEM, static_cast<cudaStream_t>(stream)>>>(map_a, map_b, M, N, K, p);
  @ID@_check(cudaGetLastError(), "launch");
}
"""


def _wgmma_operands(bn: int) -> dict[str, str]:
    regs = bn // 2
    return {"DREGS": ", ".join(f"%{i}" for i in range(regs)),
            "DOPS": ", ".join(f'"+f"(d[{i}])' for i in range(regs)),
            "NDA": str(regs), "NDB": str(regs + 1), "NSCALE": str(regs + 2)}


def gemm_source(ident: str, *, variant: str, dtype: torch.dtype, tile: tuple[int, int, int, int],
                pointers: Sequence[str], ints: Sequence[str], epilogue: Sequence[str],
                helpers: str = "") -> GemmSource:
    """The binding and the kernel source of one GEMM configuration. ``tile`` is (BLOCK_M, BLOCK_N, STAGES,
    GROUP_M) (``wgmma``: BLOCK_M is 128); ``pointers`` and ``ints`` the epilogue's parameter fields in the order
    the Python launcher passes them; ``epilogue`` the C++ statements of the epilogue's body."""
    if variant not in VARIANTS:
        raise ValueError(f"CUDA gemm variant {variant!r}: use one of {', '.join(VARIANTS)}")
    if dtype not in PTX_TYPE:
        raise ValueError(f"CUDA gemm operands of {dtype}: the kernels take bfloat16 or float16")
    bm, bn, stages, group_m = tile
    if variant == "wgmma" and bm != 128:
        raise ValueError("the wgmma variant's tile is 128 rows (two consumer warpgroups of 64)")
    struct = params_struct(ident, pointers, ints)
    cpp = _fill(_BINDING, ID=ident, PARAMS=struct, NPTR=len(pointers), NINT=len(ints),
                FILL=params_fill(pointers, ints))
    values: dict[str, object] = dict(ID=ident, PARAMS=struct, HELPERS=helpers, ELEM=("__nv_bfloat16" if dtype ==
                                     torch.bfloat16 else "__half"), EPILOGUE="\n".join(f"  {s}" for s in epilogue),
                                     GROUP_M=group_m, BM=bm, BN=bn, STAGES=stages, PTX=PTX_TYPE[dtype])
    if variant == "wgmma":
        values.update(TMA_TYPE=TMA_TYPE[dtype], **_wgmma_operands(bn))
        body = _WGMMA
    else:
        body = _MMA_SYNC
    cuda = _fill(_PRELUDE + "\n" + body, **values)
    return GemmSource(cpp=cpp, cuda=cuda, arch_list=ARCH_LIST[variant])
