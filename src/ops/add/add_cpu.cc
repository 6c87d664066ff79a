// add_cpu: out = a + b, elementwise, split over the thread pool.
// Memory bound (reads 8·n bytes, writes 4·n); chunks are large so the pool's hand-off cost is
// negligible next to the copy.
#include "core/check.h"
#include "core/thread_pool.h"
#include "ops/add/add.h"

namespace roofline {

namespace {
// Below this many elements one thread streams the data faster than waking the pool.
constexpr int64_t kMinElementsPerChunk = 1 << 16;
}  // namespace

void add_cpu(const AddParams& p) {
  ROOFLINE_CHECK(p.n >= 0);
  ROOFLINE_CHECK_MSG(p.dtype == DType::kF32, "the CPU backend computes in f32");
  if (p.n == 0) return;
  ROOFLINE_CHECK(p.a != nullptr && p.b != nullptr && p.out != nullptr);
  const auto* a = static_cast<const float*>(p.a);
  const auto* b = static_cast<const float*>(p.b);
  auto* out = static_cast<float*>(p.out);
  ThreadPool::global().parallel_for(p.n, kMinElementsPerChunk, [&](int64_t begin, int64_t end) {
    // Element i is read before it is written, so out may alias a or b.
    for (int64_t i = begin; i < end; ++i) out[i] = a[i] + b[i];
  });
}

}  // namespace roofline
