// safetensors header validation and the memory-mapped file.
//
// Everything in the header is attacker-controlled: the length prefix, the JSON, every dtype,
// shape and offset. The parser checks each before any arithmetic that could overflow and before
// any tensor byte is touched, so a hostile file yields a Status and never an out-of-bounds read.
// nlohmann's exceptions never leave this file.
#include "io/safetensors.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "io/json_kind.h"

namespace roofline {
namespace {

using nlohmann::json;

constexpr const char* kSupportedDtypes = "F32, F16, BF16, I32, I64, U8";

// A JSON integer that fits a non-negative int64 (nlohmann stores non-negative literals as
// unsigned, negative ones as signed; floats like 3.0 are rejected: writers emit plain integers).
bool as_non_negative_int64(const json& v, int64_t* out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *out = static_cast<int64_t>(u);
    return true;
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < 0) return false;
    *out = i;
    return true;
  }
  return false;
}

Status parse_entry(const std::string& source, const std::string& name, const json& entry,
                   uint64_t data_bytes, SafetensorsTensorInfo* info) {
  const std::string where = "safetensors file '" + source + "': tensor '" + name + "'";
  if (!entry.is_object())
    return data_loss(where + " is " + json_kind(entry) +
                     " in the header, not an object with dtype, shape and data_offsets: the "
                     "file is corrupt");
  auto dtype_it = entry.find("dtype");
  auto shape_it = entry.find("shape");
  auto offsets_it = entry.find("data_offsets");
  if (dtype_it == entry.end() || shape_it == entry.end() || offsets_it == entry.end())
    return data_loss(where +
                     " lacks one of 'dtype', 'shape', 'data_offsets' in the header: the "
                     "file is corrupt or not a safetensors file");

  if (!dtype_it->is_string())
    return data_loss(where + " has a 'dtype' that is " + json_kind(*dtype_it) +
                     ", not a string: the file is corrupt");
  const std::string& dtype_str = dtype_it->get_ref<const std::string&>();
  std::optional<DType> dtype = dtype_from_safetensors_name(dtype_str);
  if (!dtype)
    return unimplemented(where + " has dtype '" + dtype_str +
                         "', which roofline does not "
                         "support (supported: " +
                         std::string(kSupportedDtypes) +
                         "); convert the checkpoint to one of them");
  info->dtype = *dtype;

  if (!shape_it->is_array())
    return data_loss(where + " has a 'shape' that is " + json_kind(*shape_it) +
                     ", not an array: the file is corrupt");
  if (shape_it->size() > static_cast<size_t>(kMaxRank))
    return unimplemented(where + " has rank " + std::to_string(shape_it->size()) +
                         "; roofline supports tensors of at most " + std::to_string(kMaxRank) +
                         " dimensions");
  info->shape = Shape();
  int64_t numel = 1;
  for (const json& d : *shape_it) {
    int64_t dim = 0;
    if (!as_non_negative_int64(d, &dim))
      return data_loss(where + " has shape dimension " + d.dump() +
                       ", which is not a non-negative integer: the file is corrupt");
    if (__builtin_mul_overflow(numel, dim, &numel))
      return data_loss(where +
                       " has a shape whose element count overflows 64 bits: the file "
                       "is corrupt");
    info->shape.dims[info->shape.rank++] = dim;
  }

  if (!offsets_it->is_array() || offsets_it->size() != 2)
    return data_loss(where + " has 'data_offsets' " + offsets_it->dump() +
                     ", not a [begin, end] pair: the file is corrupt");
  int64_t begin = 0, end = 0;
  if (!as_non_negative_int64((*offsets_it)[0], &begin) ||
      !as_non_negative_int64((*offsets_it)[1], &end))
    return data_loss(where + " has 'data_offsets' " + offsets_it->dump() +
                     " that are not non-negative integers: the file is corrupt");
  if (begin > end)
    return data_loss(where + " has data_offsets [" + std::to_string(begin) + ", " +
                     std::to_string(end) + "] whose begin is after its end: the file is corrupt");
  if (static_cast<uint64_t>(end) > data_bytes)
    return data_loss(where + " ends at byte " + std::to_string(end) +
                     " but the file's data section has " + std::to_string(data_bytes) +
                     " bytes: the file is truncated; download it again");
  int64_t expected_bytes = 0;
  if (__builtin_mul_overflow(numel, dtype_size_bytes(*dtype), &expected_bytes))
    return data_loss(where +
                     " has a shape whose byte count overflows 64 bits: the file is "
                     "corrupt");
  if (end - begin != expected_bytes)
    return data_loss(where + " has " + std::to_string(end - begin) + " bytes of data but shape " +
                     info->shape.to_string() + " x " + dtype_str + " needs " +
                     std::to_string(expected_bytes) + ": the file is corrupt");
  info->name = name;
  info->begin = static_cast<uint64_t>(begin);
  info->end = static_cast<uint64_t>(end);
  return ok_status();
}

Status parse_metadata(const std::string& source, const json& meta,
                      std::map<std::string, std::string>* out) {
  const std::string where = "safetensors file '" + source + "': '__metadata__'";
  if (!meta.is_object())
    return data_loss(where + " is " + json_kind(meta) + ", not an object: the file is corrupt");
  for (auto it = meta.begin(); it != meta.end(); ++it) {
    if (!it.value().is_string())
      return data_loss(where + " entry '" + it.key() + "' is " + json_kind(it.value()) +
                       ", not a string: the file is corrupt");
    (*out)[it.key()] = it.value().get<std::string>();
  }
  return ok_status();
}

}  // namespace

StatusOr<SafetensorsHeader> parse_safetensors_header(const uint8_t* data, uint64_t size,
                                                     const std::string& source) {
  const std::string where = "safetensors file '" + source + "'";
  if (data == nullptr || size < 8)
    return data_loss(where + " is " + std::to_string(size) +
                     " bytes, too small for the 8-byte header length: it is empty, truncated or "
                     "not a safetensors file");
  // The length prefix is little-endian on every platform; assemble it byte by byte.
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | data[i];
  if (header_bytes > kMaxSafetensorsHeaderBytes || header_bytes > size - 8)
    return data_loss(where + " declares an absurd header length of " +
                     std::to_string(header_bytes) + " bytes (the file has " + std::to_string(size) +
                     " bytes, the limit is " + std::to_string(kMaxSafetensorsHeaderBytes) +
                     "): it is truncated or not a safetensors file");

  const char* text = reinterpret_cast<const char*>(data + 8);
  // nlohmann keeps the last of two equal keys silently; a header that names a tensor twice is
  // ambiguous, so the callback records repeated top-level keys and the parse is rejected.
  std::set<std::string> seen_keys;
  std::string duplicate;
  json header;
  try {
    header = json::parse(
        text, text + header_bytes, [&](int depth, json::parse_event_t event, json& parsed) {
          if (depth == 1 && event == json::parse_event_t::key && parsed.is_string()) {
            const std::string& key = parsed.get_ref<const std::string&>();
            if (!seen_keys.insert(key).second && duplicate.empty()) duplicate = key;
          }
          return true;
        });
  } catch (const json::exception& e) {
    return data_loss(where + " has a header that is not valid JSON (" + e.what() +
                     "): the file is corrupt or not a safetensors file");
  }
  if (!header.is_object())
    return data_loss(where + " has a header that is " + json_kind(header) +
                     ", not a JSON object: the file is corrupt or not a safetensors file");
  if (!duplicate.empty())
    return data_loss(where + " names '" + duplicate + "' twice in its header: the file is corrupt");

  SafetensorsHeader out;
  out.data_offset = 8 + header_bytes;
  const uint64_t data_bytes = size - out.data_offset;
  out.tensors.reserve(header.size());
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      ROOFLINE_RETURN_IF_ERROR(parse_metadata(source, it.value(), &out.metadata));
      continue;
    }
    SafetensorsTensorInfo info;
    ROOFLINE_RETURN_IF_ERROR(parse_entry(source, it.key(), it.value(), data_bytes, &info));
    // The map is page aligned, so a tensor's address is aligned iff its file offset is. Typed
    // loads through a misaligned pointer are undefined behaviour; writers pad the header so every
    // tensor is aligned, and a file that is not was not written by a conforming writer.
    const uint64_t elem = static_cast<uint64_t>(dtype_size_bytes(info.dtype));
    if ((out.data_offset + info.begin) % elem != 0)
      return data_loss(where + ": tensor '" + info.name + "' starts at file offset " +
                       std::to_string(out.data_offset + info.begin) + ", not a multiple of its " +
                       std::to_string(elem) +
                       "-byte element size; re-save the file with a current safetensors writer");
    out.tensors.push_back(std::move(info));
  }

  // File order = data-section order; sorting also makes the overlap check one linear pass.
  std::sort(out.tensors.begin(), out.tensors.end(),
            [](const SafetensorsTensorInfo& a, const SafetensorsTensorInfo& b) {
              if (a.begin != b.begin) return a.begin < b.begin;
              if (a.end != b.end) return a.end < b.end;
              return a.name < b.name;
            });
  const SafetensorsTensorInfo* prev = nullptr;  // last tensor with at least one byte
  for (const SafetensorsTensorInfo& t : out.tensors) {
    if (t.begin == t.end) continue;  // an empty tensor owns no bytes, so it cannot overlap
    if (prev != nullptr && t.begin < prev->end)
      return data_loss(where + ": tensors '" + prev->name + "' [" + std::to_string(prev->begin) +
                       ", " + std::to_string(prev->end) + ") and '" + t.name + "' [" +
                       std::to_string(t.begin) + ", " + std::to_string(t.end) +
                       ") overlap in the data section: the file is corrupt");
    prev = &t;
  }
  return out;
}

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  ROOFLINE_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapped, MappedFile::open(path));
  ROOFLINE_ASSIGN_OR_RETURN(SafetensorsHeader header,
                            parse_safetensors_header(mapped->data(), mapped->size_bytes(), path));
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->file_ = std::move(mapped);
  file->header_ = std::move(header);
  for (size_t i = 0; i < file->header_.tensors.size(); ++i)
    file->index_.emplace(file->header_.tensors[i].name, i);
  return file;
}

StatusOr<TensorView> SafetensorsFile::tensor(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end())
    return not_found("tensor '" + name + "' is not in safetensors file '" + path() + "'");
  const SafetensorsTensorInfo& info = header_.tensors[it->second];
  TensorView view;
  // The mapping is read-only (PROT_READ); TensorView is mutable only because activations share
  // the type. Writing through a weight view faults, which is the intended loud failure.
  view.data = const_cast<uint8_t*>(file_->data() + header_.data_offset + info.begin);
  view.dtype = info.dtype;
  view.shape = info.shape;
  return view;
}

}  // namespace roofline
