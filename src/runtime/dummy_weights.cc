// dummy_tensor: names decide the distribution (see dummy_weights.h).
#include "runtime/dummy_weights.h"

namespace roofline {

DummyTensor dummy_tensor(const std::string& name, int64_t rank, int64_t last_dim) {
  DummyTensor t;
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the name: stable across runs and machines
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  t.seed = h;
  t.fan_in = last_dim > 0 ? last_dim : 1;
  if (name.find("embed_tokens") != std::string::npos)
    t.kind = DummyKind::kEmbedding;
  else if (rank == 1 && name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0)
    t.kind = DummyKind::kBias;
  else if (rank == 1)
    t.kind = DummyKind::kNorm;
  else
    t.kind = DummyKind::kMatrix;
  return t;
}

}  // namespace roofline
