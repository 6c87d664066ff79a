// The tile shapes of the FlashAttention prefill kernel (attention_prefill_cuda.cu), one row per
// head dim, with the reasons, and the shared-memory and grid arithmetic the launcher uses. Pure
// host functions, tested on the CPU (attention_prefill_plan_test.cc).
//
// A block serves one (sequence, KV head, tile of rows), where a row is one (query token, query head
// of the GQA group) pair, token-major: the group's heads of one token are adjacent rows, so every
// K/V tile a block stages serves all the query heads that share it. K/V tiles of `keys` positions
// are double-buffered in shared memory (cp.async gathers through the block table while the previous
// tile is computed). Each MMA warp owns 16 · m_tiles rows. The head_dim 128 kernel is
// warp-specialised: one producer warpgroup only gathers K/V, the other warpgroups only compute.
#pragma once

#include <climits>
#include <cstdint>

#include "core/cuda_stream.h"
#include "ops/attention/attention.h"
#include "ops/common/phase_trace.h"

namespace roofline {

struct PrefillTile {
  int64_t head_dim = 0;
  int64_t warps = 0;    // warps per block, producer warps included
  int64_t m_tiles = 0;  // m16 row tiles per MMA warp: rows = 16 · m_tiles · (warps - producer)
  int64_t keys = 0;     // K/V positions per shared-memory tile
  // Keep the warp's Q fragments in registers for the whole key loop (m_tiles · head_dim / 4
  // registers per thread) instead of re-reading them from shared memory for every K tile.
  bool q_in_registers = false;
  // Hopper warpgroup MMA on 128-byte-swizzled tiles (head_dim 128 only, whole warpgroups, 128
  // keys) instead of mma.sync on padded tiles.
  bool wgmma = false;
  // Warps that only gather K/V (a whole warpgroup, or 0: every warp gathers and computes).
  int64_t producer_warps = 0;
  // K/V tiles in flight: shared-memory stages of one K and one V tile each.
  int64_t stages = 2;
};

// Why these shapes (H200: 227 KiB of shared memory and 64 K registers per SM; measured steps in
// bench/results/2026-11-30-prefill-attention.md):
// - Two m16 tiles per warp (32 rows): every K and V fragment a warp reads from shared memory
//   feeds two MMAs. With one tile per warp, shared-memory reads (one ldmatrix.x4, 512 bytes, per
//   two MMAs) kept pace with the tensor cores and the kernel ran at half of FlashAttention-2.
// - 4 warps, 128 rows: each thread holds 2 tiles' f32 output (head_dim / 2 registers) and S
//   (keys / 2 registers): at head_dim 128 that is 128 + 64 registers, so Q is re-read from shared
//   memory (one ldmatrix per k-step, amortised over keys / 8 MMAs) rather than held.
// - 64 keys: 8 n-tiles of S per Q fragment, 4 k-steps of P·V; Q and the double-buffered K and V
//   tiles ((128 + 4·64) rows × (head_dim + 8) bf16) take 102 KiB at head_dim 128: two blocks per
//   SM.
// - head_dim 256 (Gemma): the output of one m16 tile alone is 128 registers per thread, so one
//   tile per warp (64 rows) and 32-key tiles (101 KiB of shared memory per block).
// - head_dim 32 and 64: registers to spare, so Q stays in registers.
// - head_dim 128 on Hopper (FlashAttention-3's structure): a producer warpgroup gathers K/V
//   through the block table with cp.async into a 3-stage ring (mbarriers: full when its copies
//   land, empty when both consumers' MMAs have read it); two consumer warpgroups of 64 rows each
//   issue wgmma (S = Q·Kᵀ and O += P·V as m64n128k16: 64 + 64 accumulator registers, plus 32 for
//   the previous tile's P) and take turns on the tensor cores (named barriers), so one's softmax
//   runs under the other's MMAs; within a warpgroup, tile j's Q·Kᵀ and tile j-1's P·V are in
//   flight together while tile j's softmax runs. 128 + 6·128 rows of 256 bytes: 225 KiB of
//   shared memory, one block per SM. The single-role version (every warp gathered and computed,
//   both warpgroups in one phase) measured 232-262 TFLOP/s at L=8192: the gather's address
//   arithmetic and the softmax left the tensor cores idle (ncu: ALU the busiest pipe).
inline constexpr PrefillTile kPrefillTiles[] = {
    {32, 4, 2, 64, true, false},
    {64, 4, 2, 64, true, false},
    {128, 12, 1, 128, false, true, 4, 3},
    {256, 4, 1, 32, false, false},
};

// The row of kPrefillTiles for head_dim; head_dim 0 when there is none.
constexpr PrefillTile prefill_tile(int64_t head_dim) {
  for (const PrefillTile& t : kPrefillTiles)
    if (t.head_dim == head_dim) return t;
  return PrefillTile{};
}

constexpr int64_t prefill_rows(const PrefillTile& t) {
  return 16 * t.m_tiles * (t.warps - t.producer_warps);
}

// mma.sync tiles pad shared-memory rows by 8 bf16 (16 bytes) so that the 8 row addresses of one
// ldmatrix phase fall in 8 distinct 16-byte bank groups; wgmma tiles are swizzled instead.
constexpr int64_t prefill_row_stride(const PrefillTile& t) {
  return t.wgmma ? t.head_dim : t.head_dim + 8;
}

// Bytes of the mbarriers after the tiles: full and empty, for K and for V, per stage.
constexpr int64_t prefill_barrier_bytes(const PrefillTile& t) {
  return t.producer_warps > 0 ? 4 * t.stages * 8 : 0;
}

// Q tile + the stages of K and V tiles, bf16 (+ 1 KiB to align wgmma's swizzle atoms) + barriers.
constexpr int64_t prefill_smem_bytes(const PrefillTile& t) {
  return (prefill_rows(t) + 2 * t.stages * t.keys) * prefill_row_stride(t) * 2 +
         (t.wgmma ? 1024 : 0) + prefill_barrier_bytes(t);
}

// Blocks along the rows of one (sequence, KV head) for the longest sequence.
constexpr int64_t prefill_row_tiles(const PrefillTile& t, int64_t max_q_len, int64_t group) {
  return (max_q_len * group + prefill_rows(t) - 1) / prefill_rows(t);
}

// The order a launch's blocks take their (sequence, KV head, row tile) in (block_rows in
// attention_prefill_cuda.cu; the hardware starts blocks in linear index order, x fastest).
// - kHeadMajor, the grid's own order: one KV head's row tiles, longest causal rows first, then the
//   next head's. Few heads' keys are in flight at a time, so the K/V tiles that every row tile of
//   a head reads again stay in L2; but at short prompts the last head's long tiles start last and
//   leave SMs idle at the end.
// - kLongestFirst: row tiles of the same length across all heads and sequences together, longest
//   first, which balances that tail; but every head's keys are in flight at once.
// Measured on the H200 (bench/results/2026-12-02-prefill-block-order.md), llama3-8b heads,
// longest first against head-major: L=1024 +26 %, 2048 +11 %, 4096 level, 8192 -1 %, 16384 -2 %,
// a ragged batch of 16,384 tokens -5 %. So longest first is taken where all the K/V the launch can
// read fits in a third of L2.
enum class PrefillBlockOrder { kHeadMajor, kLongestFirst };

// Bytes of K and V (bf16) a launch can read at most: every sequence at the longest length the
// host knows (max_seq_len, or the block tables' reach when that is unknown); INT64_MAX where the
// product would not fit.
inline int64_t prefill_kv_bytes_bound(const PagedAttentionParams& p) {
  const int64_t keys = p.max_seq_len > 0 ? p.max_seq_len : p.max_blocks_per_seq * p.block_size;
  int64_t bytes = 0;
  if (__builtin_mul_overflow(p.num_seqs, keys, &bytes) ||
      __builtin_mul_overflow(bytes, p.num_kv_heads * p.head_dim * 2 * 2, &bytes))
    return INT64_MAX;
  return bytes;
}

constexpr PrefillBlockOrder prefill_block_order(int64_t kv_bytes_bound, int64_t l2_bytes) {
  return kv_bytes_bound <= l2_bytes / 3 ? PrefillBlockOrder::kLongestFirst
                                        : PrefillBlockOrder::kHeadMajor;
}

// The head_dim 128 kernel's producer passes each key's cache slot (block · block_size + place in
// the block) between lanes as 32 bits, one shuffle, and turns it into the row's element offset
// there. When a slot's row of elements (num_kv_heads · head_dim) is a power of two, as in every
// model served so far, that is a shift; this returns its log2, else -1 (a 64-bit multiply-add).
// Measured on the H200 (bench/results/2026-12-02-prefill-producer-slots.md): the 64-bit offsets
// this replaced (two shuffles a copy) cost the consumers issue slots; the shift gained 3-4 % at
// L=8192-16384. A multiply-add (an IMAD.WIDE, on the pipe the softmax's FFMA use) had gained ~1 %
// at best (bench/results/2026-12-02-prefill-block-order.md, run 5).
constexpr int prefill_slot_shift(int64_t num_kv_heads, int64_t head_dim) {
  const int64_t row = num_kv_heads * head_dim;
  if (row <= 0 || (row & (row - 1)) != 0) return -1;
  int shift = 0;
  while ((int64_t{1} << shift) < row) ++shift;
  return shift;
}

// The tensor-core prefill kernel, called by paged_attention_cuda for batches with a sequence of
// more than kDecodeMaxQueries queries, and for every tree-masked batch; max_q_len bounds every
// sequence's q_len.
void paged_attention_prefill_cuda(const PagedAttentionParams& p, int64_t max_q_len,
                                  CudaStream stream);

#if defined(ROOFLINE_PHASE_TRACE)
// The head_dim 128 prefill kernel's phase records (phase_trace.h), in trace builds only
// (attention_trace_bench): armed, every launch writes one record per block, its K/V tiles in the
// sink word.
PhaseTraceRecorder& prefill_attention_phase_trace();
#endif

}  // namespace roofline
