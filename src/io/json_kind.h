// json_kind: a JSON value's type in words, for the error messages of the io parsers that read
// JSON (config.json, safetensors headers): "must be an integer but is a string". Private to io
// (nlohmann is a private dependency of roofline_io): include only from io's .cc files.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace roofline {

inline std::string json_kind(const nlohmann::json& v) {
  using value_t = nlohmann::json::value_t;
  switch (v.type()) {
    case value_t::null:
      return "null";
    case value_t::object:
      return "an object";
    case value_t::array:
      return "an array";
    case value_t::string:
      return "a string";
    case value_t::boolean:
      return "a boolean";
    case value_t::number_integer:
    case value_t::number_unsigned:
      return "an integer";
    case value_t::number_float:
      return "a non-integer number";
    default:
      return "an unsupported JSON value";
  }
}

}  // namespace roofline
