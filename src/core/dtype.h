// Element types and the scalar conversions the CPU backend needs.
//
// bf16 and f16 are stored as raw uint16_t bits; conversions to f32 are exact, conversions from
// f32 round to nearest even (the rounding torch and the GPU use), so CPU results that are stored
// in bf16 agree bit for bit with what a kernel writes.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace roofline {

enum class DType : uint8_t { kF32, kF16, kBF16, kI32, kI64, kU8 };

constexpr int64_t dtype_size_bytes(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kF16:
      return 2;
    case DType::kBF16:
      return 2;
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
    case DType::kU8:
      return 1;
  }
  return 0;
}

constexpr const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
    case DType::kU8:
      return "u8";
  }
  return "?";
}

inline float bf16_bits_to_f32(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return 0x7fc0;  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

inline float f16_bits_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        mant <<= 1;
        ++e;
      } while ((mant & 0x400u) == 0);
      mant &= 0x3ffu;
      u = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16_bits(float f);

// Reads element i of a float-typed buffer (f32, f16 or bf16) as f32.
inline float load_as_f32(const void* data, DType t, int64_t i) {
  switch (t) {
    case DType::kF32:
      return static_cast<const float*>(data)[i];
    case DType::kBF16:
      return bf16_bits_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::kF16:
      return f16_bits_to_f32(static_cast<const uint16_t*>(data)[i]);
    default:
      return 0.0f;
  }
}

// Converts n elements of a float-typed buffer to f32.
void convert_to_f32(const void* src, DType t, int64_t n, float* dst);

bool is_float_dtype(DType t);
std::optional<DType> dtype_from_safetensors_name(std::string_view name);

}  // namespace roofline
