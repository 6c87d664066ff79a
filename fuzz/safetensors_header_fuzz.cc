// libFuzzer target: parse_safetensors_header on arbitrary bytes. It must return a Status for any
// input, never crash, leak or read outside [data, data + size) (ASan and UBSan watch). An accepted
// header is re-checked against the guarantees later code relies on.
#include <cstdint>
#include <cstdlib>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto header = roofline::parse_safetensors_header(data, size, "fuzz-input");
  if (!header.ok()) return 0;
  const uint64_t data_bytes = size - header->data_offset;
  uint64_t prev_end = 0;
  for (const roofline::SafetensorsTensorInfo& t : header->tensors) {
    const uint64_t bytes = static_cast<uint64_t>(t.shape.numel()) *
                           static_cast<uint64_t>(roofline::dtype_size_bytes(t.dtype));
    // Sorted, in bounds, sized as shape x dtype, and disjoint (empty tensors own no bytes).
    if (t.begin > t.end || t.end > data_bytes || t.end - t.begin != bytes) std::abort();
    if (t.begin != t.end) {
      if (t.begin < prev_end) std::abort();
      prev_end = t.end;
    }
  }
  return 0;
}
