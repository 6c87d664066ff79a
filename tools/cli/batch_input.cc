#include "batch_input.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

namespace roofline::cli {

Status line_error(const std::string& path, int line, const std::string& what) {
  return roofline::invalid_argument(path + " line " + std::to_string(line) + ": " + what);
}

namespace {

// One JSON line into an item; field types and ranges of integers only (the model checks the rest).
Status parse_batch_line(const nlohmann::json& j, BatchItem* item) {
  using nlohmann::json;
  if (!j.is_object())
    return roofline::invalid_argument("expected a JSON object like {\"prompt\": \"...\"}");
  auto want_number = [&](const char* key, float* out) -> Status {
    if (!j.contains(key)) return roofline::ok_status();
    if (!j[key].is_number())
      return roofline::invalid_argument(std::string("'") + key + "' must be a number");
    *out = j[key].get<float>();
    return roofline::ok_status();
  };
  auto want_int = [&](const char* key, int64_t lo, int64_t hi, int64_t* out) -> Status {
    if (!j.contains(key)) return roofline::ok_status();
    const json& v = j[key];
    const bool fits = v.is_number_integer() &&
                      (v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(hi)
                                              : v.get<int64_t>() >= lo && v.get<int64_t>() <= hi) &&
                      v.get<int64_t>() >= lo;
    if (!fits)
      return roofline::invalid_argument(std::string("'") + key + "' must be an integer in [" +
                                        std::to_string(lo) + ", " + std::to_string(hi) + "]");
    *out = v.get<int64_t>();
    return roofline::ok_status();
  };
  auto want_ids = [&](const char* key, std::vector<int32_t>* out) -> Status {
    const json& v = j[key];
    if (!v.is_array())
      return roofline::invalid_argument(std::string("'") + key + "' must be an array of token ids");
    out->clear();
    for (const json& x : v) {
      if (!x.is_number_integer() || (!x.is_number_unsigned() && x.get<int64_t>() < 0) ||
          x.get<uint64_t>() > 0x7fffffffull)
        return roofline::invalid_argument(std::string("'") + key +
                                          "' must hold non-negative integer token ids");
      out->push_back(static_cast<int32_t>(x.get<int64_t>()));
    }
    return roofline::ok_status();
  };
  static const char* kKnown[] = {
      "prompt", "messages", "prompt_ids",         "temperature",       "top_k",
      "top_p",  "min_p",    "repetition_penalty", "frequency_penalty", "presence_penalty",
      "seed",   "stop",     "stop_token_ids",     "max_tokens",        "ignore_eos"};
  for (const auto& item_kv : j.items()) {
    // A named copy, not a structured binding: clang 14 cannot capture those in a lambda.
    const std::string key = item_kv.key();
    if (std::find_if(std::begin(kKnown), std::end(kKnown),
                     [&](const char* k) { return key == k; }) == std::end(kKnown)) {
      std::string known;
      for (const char* k : kKnown) known += std::string(known.empty() ? "" : ", ") + k;
      return roofline::invalid_argument("unknown field '" + key + "' (known: " + known + ")");
    }
  }
  const bool has_text = j.contains("prompt"), has_ids = j.contains("prompt_ids");
  const bool has_messages = j.contains("messages");
  if (int(has_text) + int(has_ids) + int(has_messages) != 1)
    return roofline::invalid_argument(
        "give exactly one of \"prompt\" (text), \"messages\" (chat) and \"prompt_ids\"");
  if (has_messages) {
    const json& m = j["messages"];
    if (!m.is_array() || m.empty())
      return roofline::invalid_argument("'messages' must be a non-empty array");
    for (const json& turn : m) {
      if (!turn.is_object() || !turn.contains("role") || !turn.contains("content") ||
          !turn["role"].is_string() || !turn["content"].is_string())
        return roofline::invalid_argument(
            "each message must be {\"role\": string, \"content\": string}");
      item->messages.push_back(
          {turn["role"].get<std::string>(), turn["content"].get<std::string>()});
    }
  } else if (has_text) {
    if (!j["prompt"].is_string()) return roofline::invalid_argument("'prompt' must be a string");
    item->text = j["prompt"].get<std::string>();
  } else {
    ROOFLINE_RETURN_IF_ERROR(want_ids("prompt_ids", &item->ids));
  }
  roofline::SamplingParams& p = item->params;
  ROOFLINE_RETURN_IF_ERROR(want_number("temperature", &p.temperature));
  int64_t top_k = p.top_k;
  ROOFLINE_RETURN_IF_ERROR(want_int("top_k", 0, 0x7fffffff, &top_k));
  p.top_k = static_cast<int32_t>(top_k);
  ROOFLINE_RETURN_IF_ERROR(want_number("top_p", &p.top_p));
  ROOFLINE_RETURN_IF_ERROR(want_number("min_p", &p.min_p));
  ROOFLINE_RETURN_IF_ERROR(want_number("repetition_penalty", &p.repetition_penalty));
  ROOFLINE_RETURN_IF_ERROR(want_number("frequency_penalty", &p.frequency_penalty));
  ROOFLINE_RETURN_IF_ERROR(want_number("presence_penalty", &p.presence_penalty));
  ROOFLINE_RETURN_IF_ERROR(want_int("max_tokens", 1, int64_t{1} << 24, &p.max_tokens));
  if (j.contains("seed")) {
    if (!j["seed"].is_number_integer() ||
        (!j["seed"].is_number_unsigned() && j["seed"].get<int64_t>() < 0))
      return roofline::invalid_argument("'seed' must be a non-negative integer");
    p.seed = j["seed"].get<uint64_t>();
  }
  if (j.contains("ignore_eos")) {
    if (!j["ignore_eos"].is_boolean())
      return roofline::invalid_argument("'ignore_eos' must be true or false");
    p.ignore_eos = j["ignore_eos"].get<bool>();
  }
  if (j.contains("stop")) {
    const json& v = j["stop"];
    p.stop.clear();
    if (v.is_string()) {
      p.stop.push_back(v.get<std::string>());
    } else if (v.is_array()) {
      for (const json& x : v) {
        if (!x.is_string())
          return roofline::invalid_argument("'stop' must be a string or an array of strings");
        p.stop.push_back(x.get<std::string>());
      }
    } else {
      return roofline::invalid_argument("'stop' must be a string or an array of strings");
    }
  }
  if (j.contains("stop_token_ids"))
    ROOFLINE_RETURN_IF_ERROR(want_ids("stop_token_ids", &p.stop_token_ids));
  return roofline::ok_status();
}

}  // namespace

StatusOr<std::vector<BatchItem>> read_batch(const std::string& path,
                                            const roofline::SamplingParams& defaults) {
  std::ifstream in(path);
  if (!in) return roofline::not_found("cannot read '" + path + "': " + std::strerror(errno));
  std::vector<BatchItem> items;
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      return line_error(path, line, std::string("not valid JSON (") + e.what() + ")");
    }
    BatchItem item;
    item.line = line;
    item.params = defaults;
    Status s = parse_batch_line(j, &item);
    // Ranges too, so the first bad line is reported first; the vocabulary bound waits for the
    // model.
    if (s.ok())
      s = roofline::validate_sampling_params(item.params, /*vocab_size=*/int64_t{1} << 31);
    if (!s.ok()) return line_error(path, line, s.message());
    items.push_back(std::move(item));
  }
  if (items.empty())
    return roofline::invalid_argument(path + " holds no prompts: one JSON object per line");
  return items;
}

Status resolve_batch(Engine& engine, const std::string& input, std::vector<BatchItem>* items) {
  const int64_t vocab = engine.info().vocab_size;
  for (BatchItem& item : *items) {
    if (!item.messages.empty()) {
      auto rendered = engine.render_chat(item.messages, /*add_generation_prompt=*/true);
      if (!rendered.ok()) return line_error(input, item.line, rendered.status().message());
      auto ids = engine.tokenize(*rendered, /*add_special_tokens=*/false);
      if (!ids.ok()) return line_error(input, item.line, ids.status().message());
      item.ids = std::move(ids).value();
    } else if (item.text) {
      if (!engine.has_tokenizer())
        return line_error(input, item.line,
                          "this model has no tokenizer: give \"prompt_ids\" instead of \"prompt\"");
      auto ids = engine.tokenize(*item.text, /*add_special_tokens=*/true);
      if (!ids.ok()) return line_error(input, item.line, ids.status().message());
      item.ids = std::move(ids).value();
    }
    if (item.ids.empty()) return line_error(input, item.line, "the prompt is empty");
    for (int32_t id : item.ids)
      if (id >= vocab)
        return line_error(input, item.line,
                          "token id " + std::to_string(id) +
                              " is out of range for this model's vocabulary of " +
                              std::to_string(vocab));
    Status v = validate_sampling_params(item.params, vocab);
    if (v.ok() && !item.params.stop.empty() && !engine.has_tokenizer())
      v = invalid_argument(
          "'stop' strings need a tokenizer and this model has none: use stop_token_ids");
    if (!v.ok()) return line_error(input, item.line, v.message());
  }
  return ok_status();
}

}  // namespace roofline::cli
