// GGUF parsing (see gguf.h) and the block dequantisers.
//
// Parsing walks the file with a bounds-checked cursor: every read first checks that the bytes are
// there, so a truncated or hostile file yields a DataLoss/InvalidArgument Status naming what was
// being read and at which byte, never a read past the map. Counts and lengths are capped before
// anything is reserved, so a header that claims 2^60 keys cannot make us allocate.
//
// Dequantisation reproduces ggml's reference dequantisers (and gguf-py's numpy ports of them) bit
// for bit: each value is computed with the same f32 operations in the same order, e.g. Q4_K is
// (d * scale) * q - (dmin * min), each product rounded to f32 before the next operation. That is
// only true without fused multiply-add contraction; x86-64's baseline ISA has no FMA and the build
// uses ISO C++ mode (-ffp-contract=off in GCC), which the golden tests in tests/io/gguf_test.cc
// would catch if either changed.
#include "io/gguf.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/dtype.h"

namespace roofline {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader and dequantisers read little-endian integers in place");

namespace {

// Caps: far above any real file (Llama 3 405B has ~1.1k tensors and ~40 keys; vocabularies are
// < 300k tokens), low enough that nothing hostile can make us reserve much before reading.
constexpr uint64_t kMaxTensorCount = uint64_t{1} << 20;
constexpr uint64_t kMaxKvCount = uint64_t{1} << 20;
constexpr uint64_t kMaxStringBytes = uint64_t{1} << 30;
constexpr uint64_t kMaxKeyBytes = 65535;        // the GGUF spec's limit
constexpr uint64_t kMaxTensorNameBytes = 4096;  // ggml itself allows 63
constexpr uint32_t kMaxDims = 4;                // GGML_MAX_DIMS
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint64_t kMaxAlignment = uint64_t{1} << 30;

using VT = GgufValueTypes;

const char* gguf_type_name(uint32_t t) {
  switch (t) {
    case VT::kU8:
      return "u8";
    case VT::kI8:
      return "i8";
    case VT::kU16:
      return "u16";
    case VT::kI16:
      return "i16";
    case VT::kU32:
      return "u32";
    case VT::kI32:
      return "i32";
    case VT::kF32:
      return "f32";
    case VT::kBool:
      return "bool";
    case VT::kString:
      return "string";
    case VT::kArray:
      return "array";
    case VT::kU64:
      return "u64";
    case VT::kI64:
      return "i64";
    case VT::kF64:
      return "f64";
    default:
      return "unknown";
  }
}

// Smallest encoded size of one value of a (non-array) type; bounds an array's element count by
// the bytes left in the file before anything is reserved.
uint64_t min_encoded_bytes(uint32_t t) {
  switch (t) {
    case VT::kU8:
    case VT::kI8:
    case VT::kBool:
      return 1;
    case VT::kU16:
    case VT::kI16:
      return 2;
    case VT::kU32:
    case VT::kI32:
    case VT::kF32:
      return 4;
    case VT::kU64:
    case VT::kI64:
    case VT::kF64:
      return 8;
    case VT::kString:
      return 8;  // the u64 length of an empty string
    default:
      return 0;
  }
}

// Block sizes of every ggml type number (ggml's type_traits; the same table as gguf-py's
// GGML_QUANT_SIZES), so the sizes and placement of tensors roofline cannot dequantise are still
// checked. Numbers missing here are unknown: their tensors are listed but have no known size.
struct TypeLayout {
  uint32_t type;
  const char* name;
  int64_t block_elems;
  int64_t block_bytes;
  bool dequantizable;
};
constexpr TypeLayout kTypeLayouts[] = {
    {0, "F32", 1, 4, true},          {1, "F16", 1, 2, true},
    {2, "Q4_0", 32, 18, true},       {3, "Q4_1", 32, 20, true},
    {6, "Q5_0", 32, 22, false},      {7, "Q5_1", 32, 24, false},
    {8, "Q8_0", 32, 34, true},       {9, "Q8_1", 32, 40, false},
    {10, "Q2_K", 256, 84, false},    {11, "Q3_K", 256, 110, false},
    {12, "Q4_K", 256, 144, true},    {13, "Q5_K", 256, 176, false},
    {14, "Q6_K", 256, 210, true},    {15, "Q8_K", 256, 292, false},
    {16, "IQ2_XXS", 256, 66, false}, {17, "IQ2_XS", 256, 74, false},
    {18, "IQ3_XXS", 256, 98, false}, {19, "IQ1_S", 256, 50, false},
    {20, "IQ4_NL", 32, 18, false},   {21, "IQ3_S", 256, 110, false},
    {22, "IQ2_S", 256, 82, false},   {23, "IQ4_XS", 256, 136, false},
    {24, "I8", 1, 1, false},         {25, "I16", 1, 2, false},
    {26, "I32", 1, 4, false},        {27, "I64", 1, 8, false},
    {28, "F64", 1, 8, false},        {29, "IQ1_M", 256, 56, false},
    {30, "BF16", 1, 2, true},        {34, "TQ1_0", 256, 54, false},
    {35, "TQ2_0", 256, 66, false},   {39, "MXFP4", 32, 17, false},
    {40, "NVFP4", 64, 36, false},    {41, "Q1_0", 128, 18, false},
};

const TypeLayout* find_layout(uint32_t type) {
  for (const TypeLayout& l : kTypeLayouts)
    if (l.type == type) return &l;
  return nullptr;
}

std::string supported_type_names() {
  std::string s;
  for (const TypeLayout& l : kTypeLayouts) {
    if (!l.dequantizable) continue;
    if (!s.empty()) s += ", ";
    s += l.name;
  }
  return s;
}

std::string mib(uint64_t bytes) {
  return std::to_string(bytes >> 20) + "." + std::to_string(((bytes & 0xfffff) * 10) >> 20) +
         " MiB (" + std::to_string(bytes) + " bytes)";
}

// A bounds-checked little-endian reader over [data, data + size).
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& source)
      : data_(data), size_(size), source_(source) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  Status truncated(const std::string& what) const {
    return data_loss("GGUF '" + source_ + "' ends at byte " + std::to_string(size_) +
                     " while reading " + what + " at byte " + std::to_string(pos_) +
                     ": the file is truncated (incomplete download?)");
  }
  Status bad(const std::string& what) const {
    return invalid_argument("GGUF '" + source_ + "': " + what + " (at byte " +
                            std::to_string(pos_) + "); the file is corrupt or not a GGUF model");
  }

  template <typename T>
  Status read(T* out, const std::string& what) {
    if (remaining() < sizeof(T)) return truncated(what);
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return ok_status();
  }

  Status read_string(uint64_t max_bytes, std::string* out, const std::string& what) {
    uint64_t len = 0;
    ROOFLINE_RETURN_IF_ERROR(read(&len, "the length of " + what));
    if (len > max_bytes)
      return bad(what + " claims " + std::to_string(len) + " bytes, more than the limit of " +
                 std::to_string(max_bytes));
    if (len > remaining()) return truncated(what + " (" + std::to_string(len) + " bytes)");
    out->assign(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return ok_status();
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& source_;
};

// Reads one integer of any GGUF integer type as int64; u64 values above INT64_MAX are refused
// rather than wrapped so a size can never come out negative.
Status read_integer(Cursor& c, uint32_t type, const std::string& what, int64_t* out) {
  switch (type) {
#define ROOFLINE_GGUF_INT(tag, ctype)           \
  case tag: {                                   \
    ctype v{};                                  \
    ROOFLINE_RETURN_IF_ERROR(c.read(&v, what)); \
    *out = static_cast<int64_t>(v);             \
    return ok_status();                         \
  }
    ROOFLINE_GGUF_INT(VT::kU8, uint8_t)
    ROOFLINE_GGUF_INT(VT::kI8, int8_t)
    ROOFLINE_GGUF_INT(VT::kU16, uint16_t)
    ROOFLINE_GGUF_INT(VT::kI16, int16_t)
    ROOFLINE_GGUF_INT(VT::kU32, uint32_t)
    ROOFLINE_GGUF_INT(VT::kI32, int32_t)
    ROOFLINE_GGUF_INT(VT::kI64, int64_t)
#undef ROOFLINE_GGUF_INT
    case VT::kU64: {
      uint64_t v = 0;
      ROOFLINE_RETURN_IF_ERROR(c.read(&v, what));
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return c.bad(what + " is the u64 " + std::to_string(v) +
                     ", too large for roofline's 64-bit signed integers");
      *out = static_cast<int64_t>(v);
      return ok_status();
    }
    default:
      return internal_error("read_integer on a non-integer GGUF type");
  }
}

bool is_integer_type(uint32_t t) {
  return t == VT::kU8 || t == VT::kI8 || t == VT::kU16 || t == VT::kI16 || t == VT::kU32 ||
         t == VT::kI32 || t == VT::kU64 || t == VT::kI64;
}

Status read_bool(Cursor& c, const std::string& what, bool* out) {
  uint8_t b = 0;
  ROOFLINE_RETURN_IF_ERROR(c.read(&b, what));
  if (b > 1) return c.bad(what + " is a bool stored as " + std::to_string(b) + ", not 0 or 1");
  *out = b != 0;
  return ok_status();
}

Status read_float(Cursor& c, uint32_t type, const std::string& what, double* out) {
  if (type == VT::kF32) {
    float f = 0;
    ROOFLINE_RETURN_IF_ERROR(c.read(&f, what));
    *out = f;
  } else {
    ROOFLINE_RETURN_IF_ERROR(c.read(out, what));
  }
  return ok_status();
}

template <typename T>
Status reserve_checked(Cursor& c, uint64_t count, uint32_t elem_type, const std::string& what,
                       std::vector<T>* v) {
  // Every element takes at least min_encoded_bytes, so a count the remaining bytes cannot hold
  // is a lie; refusing it before reserve() keeps a hostile count from allocating.
  if (count > c.remaining() / min_encoded_bytes(elem_type))
    return c.truncated(what + " (" + std::to_string(count) + " elements of " +
                       gguf_type_name(elem_type) + ")");
  v->reserve(static_cast<size_t>(count));
  return ok_status();
}

Status read_array(Cursor& c, const std::string& what, GgufValue* out) {
  uint32_t elem_type = 0;
  uint64_t count = 0;
  ROOFLINE_RETURN_IF_ERROR(c.read(&elem_type, "the element type of " + what));
  ROOFLINE_RETURN_IF_ERROR(c.read(&count, "the length of " + what));
  if (elem_type == VT::kArray)
    return c.bad(what +
                 " is an array of arrays; nested arrays are not supported (no model "
                 "roofline loads uses them)");
  if (elem_type > VT::kF64)
    return c.bad(what + " has element type " + std::to_string(elem_type) +
                 ", which is not a GGUF value type");
  out->array_type = elem_type;
  const std::string elem = "an element of " + what;
  if (is_integer_type(elem_type)) {
    std::vector<int64_t> v;
    ROOFLINE_RETURN_IF_ERROR(reserve_checked(c, count, elem_type, what, &v));
    for (uint64_t i = 0; i < count; ++i) {
      int64_t x = 0;
      ROOFLINE_RETURN_IF_ERROR(read_integer(c, elem_type, elem, &x));
      v.push_back(x);
    }
    out->value = GgufValue::Array(std::move(v));
  } else if (elem_type == VT::kF32 || elem_type == VT::kF64) {
    std::vector<double> v;
    ROOFLINE_RETURN_IF_ERROR(reserve_checked(c, count, elem_type, what, &v));
    for (uint64_t i = 0; i < count; ++i) {
      double x = 0;
      ROOFLINE_RETURN_IF_ERROR(read_float(c, elem_type, elem, &x));
      v.push_back(x);
    }
    out->value = GgufValue::Array(std::move(v));
  } else if (elem_type == VT::kBool) {
    std::vector<bool> v;
    ROOFLINE_RETURN_IF_ERROR(reserve_checked(c, count, elem_type, what, &v));
    for (uint64_t i = 0; i < count; ++i) {
      bool x = false;
      ROOFLINE_RETURN_IF_ERROR(read_bool(c, elem, &x));
      v.push_back(x);
    }
    out->value = GgufValue::Array(std::move(v));
  } else {  // VT::kString
    std::vector<std::string> v;
    ROOFLINE_RETURN_IF_ERROR(reserve_checked(c, count, elem_type, what, &v));
    for (uint64_t i = 0; i < count; ++i) {
      std::string s;
      ROOFLINE_RETURN_IF_ERROR(c.read_string(kMaxStringBytes, &s, elem));
      v.push_back(std::move(s));
    }
    out->value = GgufValue::Array(std::move(v));
  }
  return ok_status();
}

Status read_value(Cursor& c, uint32_t type, const std::string& what, GgufValue* out) {
  out->gguf_type = type;
  if (is_integer_type(type)) {
    int64_t v = 0;
    ROOFLINE_RETURN_IF_ERROR(read_integer(c, type, what, &v));
    out->value = v;
  } else if (type == VT::kF32 || type == VT::kF64) {
    double v = 0;
    ROOFLINE_RETURN_IF_ERROR(read_float(c, type, what, &v));
    out->value = v;
  } else if (type == VT::kBool) {
    bool v = false;
    ROOFLINE_RETURN_IF_ERROR(read_bool(c, what, &v));
    out->value = v;
  } else if (type == VT::kString) {
    std::string s;
    ROOFLINE_RETURN_IF_ERROR(c.read_string(kMaxStringBytes, &s, what));
    out->value = std::move(s);
  } else if (type == VT::kArray) {
    return read_array(c, what, out);
  } else {
    return c.bad(what + " has type " + std::to_string(type) + ", which is not a GGUF value type");
  }
  return ok_status();
}

// ---- dequantisers: one block at a time, y receives block_elems floats ----

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
float load_f16(const uint8_t* p) { return f16_bits_to_f32(load_u16(p)); }

// Q4_0: f16 d, 16 bytes; element j < 16 is the low nibble of byte j, element 16 + j the high one.
void dequant_q4_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((qs[j] & 0x0f) - 8);
    y[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
  }
}

// Q4_1: f16 d, f16 m, 16 bytes of nibbles laid out as in Q4_0; value = q * d + m.
void dequant_q4_1(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float m = load_f16(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    const float lo = d * static_cast<float>(qs[j] & 0x0f);
    const float hi = d * static_cast<float>(qs[j] >> 4);
    y[j] = lo + m;
    y[j + 16] = hi + m;
  }
}

// Q8_0: f16 d, 32 int8.
void dequant_q8_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(qs[j]) * d;
}

// Q4_K: 256 elements in 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min packed into
// 12 bytes: sub-blocks 0..3 keep theirs in the low 6 bits of bytes 0..3 (scale) and 4..7 (min);
// sub-blocks 4..7 take their low 4 bits from the nibbles of bytes 8..11 (scale low, min high)
// and their top 2 bits from the spare top bits of bytes 0..3 (scale) and 4..7 (min).
// The 128 quant bytes hold sub-blocks in pairs: 32 bytes whose low nibbles are sub-block 2p and
// high nibbles sub-block 2p + 1.
void dequant_q4_k(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float dmin = load_f16(b + 2);
  const uint8_t* s = b + 4;
  const uint8_t* qs = b + 16;
  for (int sub = 0; sub < 8; ++sub) {
    int sc, mn;
    if (sub < 4) {
      sc = s[sub] & 63;
      mn = s[sub + 4] & 63;
    } else {
      sc = (s[sub + 4] & 0x0f) | ((s[sub - 4] >> 6) << 4);
      mn = (s[sub + 4] >> 4) | ((s[sub] >> 6) << 4);
    }
    const float scale = d * static_cast<float>(sc);
    const float offset = dmin * static_cast<float>(mn);
    const uint8_t* q = qs + 32 * (sub / 2);
    const int shift = 4 * (sub % 2);
    for (int l = 0; l < 32; ++l) {
      const float v = scale * static_cast<float>((q[l] >> shift) & 0x0f);
      y[32 * sub + l] = v - offset;
    }
  }
}

// Q6_K: 256 six-bit values = low 4 bits (ql, 128 bytes) + high 2 bits (qh, 64 bytes), minus 32,
// times d * scale[e / 16] (16 int8 scales). Each 128-element half h uses ql[64h ..] and
// qh[32h ..]: element r of the half takes the low or high nibble (r / 64) of ql[64h + r % 64] and
// bits 2 * (r / 32) of qh[32h + r % 32].
void dequant_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = load_f16(b + 208);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, r = e % 128;
    const int lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0f;
    const int hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 0x03;
    const int q = (lo | (hi << 4)) - 32;
    const float scale = d * static_cast<float>(scales[e / 16]);
    y[e] = scale * static_cast<float>(q);
  }
}

}  // namespace

const char* ggml_type_name(uint32_t type) {
  const TypeLayout* l = find_layout(type);
  if (l != nullptr) return l->name;
  // Unknown numbers: a small static table keeps the returned pointer valid without allocation.
  static thread_local char buf[32];
  std::snprintf(buf, sizeof(buf), "type %u", type);
  return buf;
}

bool ggml_block_layout(uint32_t type, int64_t* block_elems, int64_t* block_bytes) {
  const TypeLayout* l = find_layout(type);
  if (l == nullptr || !l->dequantizable) return false;
  *block_elems = l->block_elems;
  *block_bytes = l->block_bytes;
  return true;
}

bool ggml_storage_layout(uint32_t type, int64_t* block_elems, int64_t* block_bytes) {
  const TypeLayout* l = find_layout(type);
  if (l == nullptr) return false;
  *block_elems = l->block_elems;
  *block_bytes = l->block_bytes;
  return true;
}

Status dequantize_to_f32(uint32_t type, const uint8_t* src, int64_t n, float* dst) {
  int64_t be = 0, bb = 0;
  if (!ggml_block_layout(type, &be, &bb))
    return unimplemented(std::string("cannot dequantise ggml type ") + ggml_type_name(type) +
                         "; roofline supports " + supported_type_names());
  if (n < 0 || n % be != 0)
    return invalid_argument("dequantise " + std::to_string(n) + " elements of " +
                            ggml_type_name(type) + ": not a multiple of its block of " +
                            std::to_string(be));
  const int64_t blocks = n / be;
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      break;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_bits_to_f32(load_u16(src + 2 * i));
      break;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_bits_to_f32(load_u16(src + 2 * i));
      break;
    case GgmlType::kQ4_0:
      for (int64_t i = 0; i < blocks; ++i) dequant_q4_0(src + i * bb, dst + i * be);
      break;
    case GgmlType::kQ4_1:
      for (int64_t i = 0; i < blocks; ++i) dequant_q4_1(src + i * bb, dst + i * be);
      break;
    case GgmlType::kQ8_0:
      for (int64_t i = 0; i < blocks; ++i) dequant_q8_0(src + i * bb, dst + i * be);
      break;
    case GgmlType::kQ4_K:
      for (int64_t i = 0; i < blocks; ++i) dequant_q4_k(src + i * bb, dst + i * be);
      break;
    case GgmlType::kQ6_K:
      for (int64_t i = 0; i < blocks; ++i) dequant_q6_k(src + i * bb, dst + i * be);
      break;
  }
  return ok_status();
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  ROOFLINE_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapped, MappedFile::open(path));
  ROOFLINE_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file,
                            parse(mapped->data(), mapped->size_bytes(), path));
  file->file_ = std::move(mapped);
  return file;
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::parse(const uint8_t* data, uint64_t size,
                                                    const std::string& source) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->data_ = data;
  f->size_ = size;
  f->source_ = source;
  Cursor c(data, size, f->source_);

  uint8_t magic[4] = {};
  if (size < 4 || std::memcmp(data, "GGUF", 4) != 0)
    return invalid_argument("'" + source +
                            "' is not a GGUF file: it does not start with the magic bytes "
                            "\"GGUF\"");
  ROOFLINE_RETURN_IF_ERROR(c.read(&magic, "the magic"));
  ROOFLINE_RETURN_IF_ERROR(c.read(&f->version_, "the version"));
  if (f->version_ == 1)
    return unimplemented("GGUF '" + source +
                         "' is version 1 (2023, before 64-bit counts); roofline reads versions 2 "
                         "and 3: re-convert it with a current llama.cpp");
  if (f->version_ != 2 && f->version_ != 3) {
    // A big-endian writer stores the version byte-reversed: 0x02000000 or 0x03000000.
    if (f->version_ == 0x02000000u || f->version_ == 0x03000000u)
      return unimplemented("GGUF '" + source +
                           "' is big-endian; roofline reads little-endian GGUF only");
    return invalid_argument("GGUF '" + source + "' has version " + std::to_string(f->version_) +
                            "; roofline reads versions 2 and 3");
  }
  uint64_t tensor_count = 0, kv_count = 0;
  ROOFLINE_RETURN_IF_ERROR(c.read(&tensor_count, "the tensor count"));
  ROOFLINE_RETURN_IF_ERROR(c.read(&kv_count, "the metadata key/value count"));
  if (tensor_count > kMaxTensorCount)
    return c.bad("the header claims " + std::to_string(tensor_count) +
                 " tensors, more than the limit of " + std::to_string(kMaxTensorCount));
  if (kv_count > kMaxKvCount)
    return c.bad("the header claims " + std::to_string(kv_count) +
                 " metadata entries, more than the limit of " + std::to_string(kMaxKvCount));

  for (uint64_t i = 0; i < kv_count; ++i) {
    const std::string entry = "metadata entry " + std::to_string(i);
    std::string key;
    ROOFLINE_RETURN_IF_ERROR(c.read_string(kMaxKeyBytes, &key, "the key of " + entry));
    uint32_t type = 0;
    ROOFLINE_RETURN_IF_ERROR(c.read(&type, "the value type of '" + key + "'"));
    GgufValue value;
    ROOFLINE_RETURN_IF_ERROR(read_value(c, type, "the value of '" + key + "'", &value));
    if (!f->metadata_.emplace(key, std::move(value)).second)
      return c.bad("metadata key '" + key + "' appears twice");
  }

  uint64_t alignment = kDefaultAlignment;
  if (f->has("general.alignment")) {
    auto a = f->get_int("general.alignment");
    if (!a.ok()) return a.status();
    if (*a <= 0 || static_cast<uint64_t>(*a) > kMaxAlignment ||
        !std::has_single_bit(static_cast<uint64_t>(*a)))
      return invalid_argument("GGUF '" + source + "': general.alignment is " + std::to_string(*a) +
                              "; it must be a power of two up to " + std::to_string(kMaxAlignment));
    alignment = static_cast<uint64_t>(*a);
  }

  f->tensors_.reserve(static_cast<size_t>(std::min<uint64_t>(tensor_count, c.remaining() / 24)));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo t;
    ROOFLINE_RETURN_IF_ERROR(
        c.read_string(kMaxTensorNameBytes, &t.name, "the name of tensor " + std::to_string(i)));
    const std::string what = "tensor '" + t.name + "'";
    uint32_t n_dims = 0;
    ROOFLINE_RETURN_IF_ERROR(c.read(&n_dims, "the dimension count of " + what));
    if (n_dims < 1 || n_dims > kMaxDims)
      return c.bad(what + " has " + std::to_string(n_dims) +
                   " dimensions; ggml tensors have 1 to " + std::to_string(kMaxDims));
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = 0;
      ROOFLINE_RETURN_IF_ERROR(c.read(&dim, "a dimension of " + what));
      if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          __builtin_mul_overflow(numel, static_cast<int64_t>(dim), &numel))
        return c.bad(what + " has dimension " + std::to_string(d) + " = " + std::to_string(dim) +
                     "; dimensions must be positive and their product must fit 63 bits");
      t.dims.push_back(static_cast<int64_t>(dim));
    }
    ROOFLINE_RETURN_IF_ERROR(c.read(&t.type, "the type of " + what));
    ROOFLINE_RETURN_IF_ERROR(c.read(&t.offset, "the data offset of " + what));
    int64_t be = 0, bb = 0;
    if (ggml_storage_layout(t.type, &be, &bb)) {
      // ggml stores whole blocks per row, so the fastest dimension must be a block multiple.
      if (t.dims[0] % be != 0)
        return c.bad(what + " has rows of " + std::to_string(t.dims[0]) + " elements, not a " +
                     "multiple of the " + std::to_string(be) + "-element blocks of type " +
                     ggml_type_name(t.type));
      int64_t bytes = 0;
      if (__builtin_mul_overflow(numel / be, bb, &bytes))
        return c.bad(what + " is too large: its size in bytes does not fit 63 bits");
      t.size_bytes = static_cast<uint64_t>(bytes);
    }
    // Unknown type numbers keep size_bytes 0: the tensor is listed (its loader reports the type)
    // but has no byte range to check.
    if (!f->tensor_index_.emplace(t.name, f->tensors_.size()).second)
      return c.bad("tensor name '" + t.name + "' appears twice");
    f->tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment after the tensor infos.
  const uint64_t end_of_infos = c.pos();
  f->data_offset_ = end_of_infos + (alignment - end_of_infos % alignment) % alignment;
  if (f->tensors_.empty()) {
    f->data_offset_ = std::min(f->data_offset_, size);  // no data section is needed
    return f;
  }
  if (f->data_offset_ > size)
    return data_loss("GGUF '" + source + "' ends at byte " + std::to_string(size) +
                     " before its data section, which starts at byte " +
                     std::to_string(f->data_offset_) + ": the file is truncated");
  const uint64_t data_bytes = size - f->data_offset_;
  std::vector<const GgufTensorInfo*> order;
  order.reserve(f->tensors_.size());
  for (const GgufTensorInfo& t : f->tensors_) {
    if (t.offset % alignment != 0)
      return invalid_argument("GGUF '" + source + "': tensor '" + t.name + "' starts at offset " +
                              std::to_string(t.offset) + ", not a multiple of the alignment " +
                              std::to_string(alignment) + "; the file is corrupt");
    if (t.offset > data_bytes)
      return data_loss("GGUF '" + source + "': tensor '" + t.name + "' starts at byte " +
                       std::to_string(t.offset) + " of the data section, which has only " +
                       std::to_string(data_bytes) + " bytes: the file is truncated or corrupt");
    if (t.size_bytes > data_bytes - t.offset)
      return data_loss("GGUF '" + source + "': tensor '" + t.name + "' (" + ggml_type_name(t.type) +
                       ", " + std::to_string(t.size_bytes) + " bytes) ends at byte " +
                       mib(f->data_offset_ + t.offset + t.size_bytes) + " but the file has " +
                       mib(size) + ": the download is truncated");
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const GgufTensorInfo& prev = *order[i - 1];
    if (prev.offset + prev.size_bytes > order[i]->offset)
      return invalid_argument("GGUF '" + source + "': tensors '" + prev.name + "' and '" +
                              order[i]->name + "' overlap in the data section (bytes " +
                              std::to_string(prev.offset) + "+" + std::to_string(prev.size_bytes) +
                              " and " + std::to_string(order[i]->offset) +
                              "); the file is corrupt");
  }
  return f;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

Status wrong_type(const GgufFile& f, const std::string& key, const GgufValue& v,
                  const char* wanted) {
  std::string has = gguf_type_name(v.gguf_type);
  if (v.gguf_type == VT::kArray) has += std::string(" of ") + gguf_type_name(v.array_type);
  return invalid_argument("GGUF '" + f.source() + "': metadata '" + key + "' is " + has + " but " +
                          wanted + " is expected; the file does not follow the GGUF conventions");
}

Status missing_key(const GgufFile& f, const std::string& key) {
  return not_found("GGUF '" + f.source() + "' has no metadata key '" + key + "'");
}

}  // namespace

StatusOr<int64_t> GgufFile::get_int(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return missing_key(*this, key);
  if (const int64_t* v = std::get_if<int64_t>(&it->second.value)) return *v;
  return wrong_type(*this, key, it->second, "an integer");
}

StatusOr<double> GgufFile::get_float(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return missing_key(*this, key);
  if (const double* v = std::get_if<double>(&it->second.value)) return *v;
  if (const int64_t* v = std::get_if<int64_t>(&it->second.value)) return static_cast<double>(*v);
  return wrong_type(*this, key, it->second, "a number");
}

StatusOr<bool> GgufFile::get_bool(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return missing_key(*this, key);
  if (const bool* v = std::get_if<bool>(&it->second.value)) return *v;
  return wrong_type(*this, key, it->second, "a bool");
}

StatusOr<std::string> GgufFile::get_string(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return missing_key(*this, key);
  if (const std::string* v = std::get_if<std::string>(&it->second.value)) return *v;
  return wrong_type(*this, key, it->second, "a string");
}

StatusOr<std::vector<std::string>> GgufFile::get_string_array(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return missing_key(*this, key);
  if (const auto* a = std::get_if<GgufValue::Array>(&it->second.value))
    if (const auto* v = std::get_if<std::vector<std::string>>(a)) return *v;
  return wrong_type(*this, key, it->second, "an array of strings");
}

StatusOr<std::vector<int64_t>> GgufFile::get_int_array(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return missing_key(*this, key);
  if (const auto* a = std::get_if<GgufValue::Array>(&it->second.value))
    if (const auto* v = std::get_if<std::vector<int64_t>>(a)) return *v;
  return wrong_type(*this, key, it->second, "an array of integers");
}

StatusOr<std::vector<double>> GgufFile::get_float_array(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return missing_key(*this, key);
  if (const auto* a = std::get_if<GgufValue::Array>(&it->second.value)) {
    if (const auto* v = std::get_if<std::vector<double>>(a)) return *v;
    if (const auto* v = std::get_if<std::vector<int64_t>>(a))
      return std::vector<double>(v->begin(), v->end());
  }
  return wrong_type(*this, key, it->second, "an array of numbers");
}

int64_t GgufFile::array_length(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return -1;
  const auto* a = std::get_if<GgufValue::Array>(&it->second.value);
  if (a == nullptr) return -1;
  return std::visit([](const auto& v) { return static_cast<int64_t>(v.size()); }, *a);
}

}  // namespace roofline
