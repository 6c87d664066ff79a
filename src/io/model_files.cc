// open_model_files: dispatch on what the path is (see model_files.h).
#include "io/model_files.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "io/gguf_model.h"

namespace roofline {
namespace {

constexpr const char* kAccepted =
    "roofline accepts a Hugging Face model directory (config.json + *.safetensors) or a "
    "llama.cpp .gguf file";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

StatusOr<ModelFiles> open_model_files(const std::string& path) {
  struct stat st {};
  if (path.empty()) return invalid_argument(std::string("no model path given; ") + kAccepted);
  if (::stat(path.c_str(), &st) != 0) {
    const int e = errno;
    if (e == ENOENT) return not_found("model path '" + path + "' does not exist; " + kAccepted);
    return io_error("cannot inspect model path '" + path + "': " + std::strerror(e));
  }
  ModelFiles files;
  if (S_ISDIR(st.st_mode)) {
    ROOFLINE_ASSIGN_OR_RETURN(files.config, load_model_config(path));
    ROOFLINE_ASSIGN_OR_RETURN(files.weights, WeightStore::open(path));
    return files;
  }
  if (S_ISREG(st.st_mode) && ends_with(path, ".gguf")) {
    ROOFLINE_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::open(path));
    ROOFLINE_ASSIGN_OR_RETURN(files.config, model_config_from_gguf(*gguf));
    ROOFLINE_ASSIGN_OR_RETURN(files.weights, load_gguf_weights(*gguf, files.config));
    files.gguf = std::move(gguf);
    return files;
  }
  return invalid_argument("model path '" + path + "' is " +
                          (S_ISREG(st.st_mode) ? "a file without the .gguf extension"
                                               : "neither a directory nor a regular file") +
                          "; " + kAccepted);
}

}  // namespace roofline
