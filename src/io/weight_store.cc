// WeightStore: opens a model directory's safetensors files and indexes every tensor by name, or
// owns tensors its caller fills (GGUF weights after dequantisation).
//
// The shard index (model.safetensors.index.json) is hostile input like the shards themselves:
// shard names are plain file names (no path traversal out of the model directory), every tensor
// the index lists must be in the shard it names, and no tensor may live in two files, so a name
// always resolves to exactly one view.
#include "io/weight_store.h"

#include <sys/stat.h>

#include <new>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "core/mapped_file.h"

namespace roofline {
namespace {

using nlohmann::json;

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";
// Real indexes are a few hundred KB (one line per tensor); this bounds a hostile one.
constexpr uint64_t kMaxIndexBytes = 64ull << 20;

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

// A shard must be a file directly inside the model directory: an index that names
// "../../etc/passwd" or "/abs/path" must not make us map files outside it.
bool is_plain_file_name(const std::string& name) {
  if (name.empty() || name == "." || name == "..") return false;
  if (name.find("..") != std::string::npos) return false;
  for (char c : name)
    if (c == '/' || c == '\\' || c == '\0') return false;
  return true;
}

// Reads the index and returns tensor name -> shard file name.
StatusOr<std::map<std::string, std::string>> read_weight_map(const std::string& index_path) {
  ROOFLINE_ASSIGN_OR_RETURN(std::string text, read_text_file(index_path, kMaxIndexBytes));
  json index = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded())
    return data_loss("shard index '" + index_path +
                     "' is not valid JSON: the download is incomplete or the file is corrupt");
  if (!index.is_object()) return data_loss("shard index '" + index_path + "' is not a JSON object");
  auto map_it = index.find("weight_map");
  if (map_it == index.end() || !map_it->is_object())
    return data_loss("shard index '" + index_path +
                     "' has no 'weight_map' object mapping tensor names to shard files");
  if (map_it->empty())
    return data_loss("shard index '" + index_path + "' has an empty 'weight_map': no tensors");
  std::map<std::string, std::string> weight_map;
  for (auto it = map_it->begin(); it != map_it->end(); ++it) {
    if (!it.value().is_string())
      return data_loss("shard index '" + index_path + "' maps tensor '" + it.key() + "' to " +
                       it.value().dump() + ", not to a shard file name");
    const std::string& shard = it.value().get_ref<const std::string&>();
    if (!is_plain_file_name(shard))
      return invalid_argument("shard index '" + index_path + "' maps tensor '" + it.key() +
                              "' to '" + shard +
                              "', which is not a plain file name in the model directory; shard "
                              "paths with '/', '\\' or '..' are refused to keep reads inside it");
    weight_map.emplace(it.key(), shard);
  }
  return weight_map;
}

}  // namespace

StatusOr<std::unique_ptr<WeightStore>> WeightStore::open(const std::string& model_dir) {
  std::unique_ptr<WeightStore> store(new WeightStore());
  store->dir_ = model_dir;

  const std::string index_path = join_path(model_dir, kIndexName);
  const std::string single_path = join_path(model_dir, kSingleName);
  std::map<std::string, std::string> weight_map;  // empty for a single-file model
  std::vector<std::string> shard_names;
  if (is_regular_file(index_path)) {
    ROOFLINE_ASSIGN_OR_RETURN(weight_map, read_weight_map(index_path));
    std::set<std::string> distinct;
    for (const auto& [tensor, shard] : weight_map) distinct.insert(shard);
    shard_names.assign(distinct.begin(), distinct.end());
  } else if (is_regular_file(single_path)) {
    shard_names.push_back(kSingleName);
  } else {
    return not_found("no weights in '" + model_dir + "': looked for '" + kIndexName + "' and '" +
                     kSingleName +
                     "'; point to a Hugging Face model directory with safetensors "
                     "weights");
  }

  for (const std::string& shard : shard_names) {
    const std::string path = join_path(model_dir, shard);
    auto file = SafetensorsFile::open(path);
    if (!file.ok()) {
      if (file.status().code() == StatusCode::kNotFound && !weight_map.empty())
        return not_found("shard '" + shard + "' listed in '" + index_path +
                         "' does not exist: the download is incomplete");
      return file.status();
    }
    const size_t file_index = store->files_.size();
    for (const SafetensorsTensorInfo& info : (*file)->header().tensors) {
      ROOFLINE_ASSIGN_OR_RETURN(TensorView view, (*file)->tensor(info.name));
      auto [it, inserted] = store->tensors_.emplace(info.name, std::make_pair(file_index, view));
      if (!inserted)
        return data_loss("tensor '" + info.name + "' appears in both '" +
                         store->files_[it->second.first]->path() + "' and '" + path +
                         "': the model directory mixes two checkpoints");
      store->total_bytes_ += static_cast<uint64_t>(info.end - info.begin);
    }
    store->files_.push_back(std::move(file).value());
  }

  for (const auto& [tensor, shard] : weight_map) {
    auto it = store->tensors_.find(tensor);
    const std::string where =
        it == store->tensors_.end() ? std::string() : store->files_[it->second.first]->path();
    if (it == store->tensors_.end() || where != join_path(model_dir, shard))
      return data_loss("shard index '" + index_path + "' says tensor '" + tensor + "' is in '" +
                       shard +
                       "' but that shard has no such tensor: the index and the shards "
                       "disagree (incomplete download or mixed checkpoints)");
  }
  return store;
}

void WeightStore::AlignedFree::operator()(uint8_t* p) const {
  ::operator delete[](p, std::align_val_t(64));
}

std::unique_ptr<WeightStore> WeightStore::create_owning(const std::string& source) {
  std::unique_ptr<WeightStore> store(new WeightStore());
  store->dir_ = source;
  store->owning_ = true;
  return store;
}

StatusOr<int64_t> WeightStore::check_new_tensor(const std::string& name, DType dtype,
                                                const Shape& shape) const {
  if (tensors_.count(name) != 0)
    return invalid_argument("tensor '" + name + "' is added twice to the weights of '" + dir_ +
                            "'");
  int64_t bytes = dtype_size_bytes(dtype);
  for (int i = 0; i < shape.rank; ++i)
    if (shape[i] <= 0 || __builtin_mul_overflow(bytes, shape[i], &bytes))
      return invalid_argument("tensor '" + name + "' of '" + dir_ + "' has shape " +
                              shape.to_string() + ", which is empty or too large");
  return bytes;
}

Status WeightStore::add_virtual(const std::string& name, DType dtype, const Shape& shape) {
  ROOFLINE_ASSIGN_OR_RETURN(int64_t bytes, check_new_tensor(name, dtype, shape));
  TensorView view;
  view.dtype = dtype;
  view.shape = shape;
  tensors_.emplace(name, std::make_pair(kOwned, view));
  total_bytes_ += static_cast<uint64_t>(bytes);
  return ok_status();
}

StatusOr<TensorView> WeightStore::add_owned(const std::string& name, DType dtype,
                                            const Shape& shape) {
  ROOFLINE_ASSIGN_OR_RETURN(int64_t bytes, check_new_tensor(name, dtype, shape));
  // 64-byte alignment: a cache line, and what vectorised kernels over these rows want.
  auto* p = static_cast<uint8_t*>(
      ::operator new[](static_cast<size_t>(bytes), std::align_val_t(64), std::nothrow));
  if (p == nullptr)
    return resource_exhausted("cannot allocate " + std::to_string(bytes >> 20) +
                              " MiB for tensor '" + name + "' of '" + dir_ +
                              "': not enough memory for the f32 weights");
  owned_.emplace_back(p);
  TensorView view;
  view.data = p;
  view.dtype = dtype;
  view.shape = shape;
  tensors_.emplace(name, std::make_pair(kOwned, view));
  total_bytes_ += static_cast<uint64_t>(bytes);
  return view;
}

bool WeightStore::contains(const std::string& name) const { return tensors_.count(name) != 0; }

StatusOr<TensorView> WeightStore::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    return not_found("tensor '" + name + "' is not in the weights of '" + dir_ +
                     (owning_
                          ? "': the file does not match the architecture its metadata names"
                          : "': the checkpoint does not match the architecture in config.json"));
  return it->second.second;
}

StatusOr<TensorView> WeightStore::get_float(const std::string& name, const Shape& expected) const {
  ROOFLINE_ASSIGN_OR_RETURN(TensorView view, get(name));
  if (!is_float_dtype(view.dtype))
    return invalid_argument("tensor '" + name + "' in '" + dir_ + "' has dtype " +
                            dtype_name(view.dtype) +
                            " but a float tensor (f32, f16 or bf16) is needed; quantised or "
                            "integer weights are not supported here");
  if (!(view.shape == expected))
    return data_loss("tensor '" + name + "' has shape " + view.shape.to_string() +
                     " but the config implies " + expected.to_string() + ": " +
                     (owning_ ? "the metadata and the tensors of '" + dir_ + "' disagree"
                              : "config.json and the weights in '" + dir_ + "' disagree"));
  return view;
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, entry] : tensors_) out.push_back(name);  // std::map: already sorted
  return out;
}

}  // namespace roofline
