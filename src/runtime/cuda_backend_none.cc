// CPU-only builds: the CUDA backend is not compiled in.
#include "runtime/backend.h"

namespace roofline {

StatusOr<std::unique_ptr<Backend>> create_cuda_backend(const std::string& device) {
  return unimplemented(
      "--device " + device +
      ": this roofline was built without CUDA; configure with `cmake --preset cuda`");
}

}  // namespace roofline
