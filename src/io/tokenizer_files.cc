// Readers of tokenizer.json / tokenizer_config.json / generation_config.json and of GGUF
// tokenizer metadata into a TokenizerSpec (see tokenizer_files.h).
//
// tokenizer.json forms accepted, which cover the families roofline serves:
//   model        BPE (vocab, merges as "a b" strings or [a, b] pairs, unk_token, byte_fallback,
//                fuse_unk, ignore_merges; no dropout, no subword prefix/suffix)
//   normalizer   null | Prepend('▁') | Replace(' ', '▁') | a Sequence of those
//   pre_tokenizer null | ByteLevel | Split (Regex or String) | Digits | Metaspace | Sequence
//   decoder      null | ByteLevel | Replace/ByteFallback/Fuse/Strip/Metaspace (in a Sequence)
//   post_processor null | ByteLevel | TemplateProcessing | Sequence (BOS/EOS from the template)
// Anything else is Unimplemented, naming the component and the file.
#include "io/tokenizer_files.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/gguf.h"

namespace roofline {

namespace {

using nlohmann::json;

constexpr const char* kMetaspace = "\xE2\x96\x81";  // U+2581 '▁'
constexpr int64_t kMaxVocabSize = int64_t{1} << 24;

// GPT-2's pre-tokenizer regex (also used by ByteLevel with use_regex = true).
constexpr const char* kGpt2Regex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
constexpr const char* kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

StatusOr<std::string> read_text_file(const std::string& path, bool* exists) {
  std::ifstream in(path, std::ios::binary);
  *exists = static_cast<bool>(in);
  if (!in) return std::string();
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return io_error("reading " + path + " failed");
  return ss.str();
}

StatusOr<json> parse_json(std::string_view text, const std::string& source) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    return invalid_argument(source + " is not valid JSON (" + e.what() + "); re-download the file");
  }
}

// Context for error messages and field access with type checks.
struct Parser {
  std::string source;

  Status wrong_type(const std::string& path, const char* expected) const {
    return invalid_argument(source + ": '" + path + "' must be " + expected);
  }
  Status unsupported(const std::string& what) const {
    return unimplemented(source + ": " + what +
                         " is not supported by roofline's tokenizer; load the model's GGUF or "
                         "file an issue with the model name");
  }
  // Optional string field: absent or null leaves *out unchanged.
  Status opt_string(const json& obj, const char* key, const std::string& path, std::string* out,
                    bool* present = nullptr) const {
    if (present) *present = false;
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return ok_status();
    if (!it->is_string()) return wrong_type(path + "." + key, "a string");
    *out = it->get<std::string>();
    if (present) *present = true;
    return ok_status();
  }
  Status opt_bool(const json& obj, const char* key, const std::string& path, bool* out) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return ok_status();
    if (!it->is_boolean()) return wrong_type(path + "." + key, "true or false");
    *out = it->get<bool>();
    return ok_status();
  }
  Status opt_int(const json& obj, const char* key, const std::string& path, int64_t* out) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return ok_status();
    if (!it->is_number_integer()) return wrong_type(path + "." + key, "an integer");
    *out = it->get<int64_t>();
    return ok_status();
  }
};

struct JsonState {
  bool byte_level = false;      // a ByteLevel pre-tokenizer was seen
  bool byte_level_last = true;  // ... and nothing followed it
  bool metaspace = false;
  bool prepend = false;              // normaliser Prepend('▁')
  bool replace = false;              // normaliser Replace(' ', '▁')
  std::string bos_token, eos_token;  // from the post-processor template
  bool template_seen = false;
};

Status parse_normalizer(const Parser& p, const json& n, const std::string& path, JsonState* st) {
  if (n.is_null()) return ok_status();
  if (!n.is_object()) return p.wrong_type(path, "an object or null");
  std::string type;
  ROOFLINE_RETURN_IF_ERROR(p.opt_string(n, "type", path, &type));
  if (type == "Sequence") {
    auto it = n.find("normalizers");
    if (it == n.end() || !it->is_array()) return p.wrong_type(path + ".normalizers", "an array");
    for (size_t i = 0; i < it->size(); ++i) {
      ROOFLINE_RETURN_IF_ERROR(
          parse_normalizer(p, (*it)[i], path + ".normalizers[" + std::to_string(i) + "]", st));
    }
    return ok_status();
  }
  if (type == "Prepend") {
    std::string content;
    ROOFLINE_RETURN_IF_ERROR(p.opt_string(n, "prepend", path, &content));
    if (content != kMetaspace) return p.unsupported("normalizer Prepend('" + content + "')");
    st->prepend = true;
    return ok_status();
  }
  if (type == "Replace") {
    auto pat = n.find("pattern");
    std::string from, to;
    if (pat != n.end() && pat->is_object() && pat->contains("String") &&
        (*pat)["String"].is_string()) {
      from = (*pat)["String"].get<std::string>();
    }
    ROOFLINE_RETURN_IF_ERROR(p.opt_string(n, "content", path, &to));
    if (from != " " || to != kMetaspace) {
      return p.unsupported("normalizer Replace('" + from + "' -> '" + to + "')");
    }
    st->replace = true;
    return ok_status();
  }
  if (type.empty()) return p.wrong_type(path + ".type", "a string");
  return p.unsupported("normalizer '" + type + "'");
}

Status parse_pre_tokenizer(const Parser& p, const json& n, const std::string& path, JsonState* st,
                           TokenizerSpec* spec) {
  if (n.is_null()) return ok_status();
  if (!n.is_object()) return p.wrong_type(path, "an object or null");
  std::string type;
  ROOFLINE_RETURN_IF_ERROR(p.opt_string(n, "type", path, &type));
  if (type != "Sequence" && st->byte_level) st->byte_level_last = false;
  if (type == "Sequence") {
    auto it = n.find("pretokenizers");
    if (it == n.end() || !it->is_array()) return p.wrong_type(path + ".pretokenizers", "an array");
    for (size_t i = 0; i < it->size(); ++i) {
      ROOFLINE_RETURN_IF_ERROR(parse_pre_tokenizer(
          p, (*it)[i], path + ".pretokenizers[" + std::to_string(i) + "]", st, spec));
    }
    return ok_status();
  }
  if (type == "ByteLevel") {
    bool add_prefix_space = false, use_regex = true;
    ROOFLINE_RETURN_IF_ERROR(p.opt_bool(n, "add_prefix_space", path, &add_prefix_space));
    ROOFLINE_RETURN_IF_ERROR(p.opt_bool(n, "use_regex", path, &use_regex));
    st->byte_level = true;
    if (add_prefix_space) {
      spec->prefix_space = PrefixSpace::kEverySegment;
      spec->prefix_space_if_missing = true;
    }
    if (use_regex) spec->splits.push_back({kGpt2Regex, SplitBehavior::kIsolated, false});
    return ok_status();
  }
  if (type == "Split") {
    RegexSplit split;
    auto pat = n.find("pattern");
    if (pat == n.end() || !pat->is_object()) return p.wrong_type(path + ".pattern", "an object");
    if (pat->contains("Regex") && (*pat)["Regex"].is_string()) {
      split.pattern = (*pat)["Regex"].get<std::string>();
    } else if (pat->contains("String") && (*pat)["String"].is_string()) {
      split.pattern = (*pat)["String"].get<std::string>();
      split.literal = true;
    } else {
      return p.wrong_type(path + ".pattern", "{\"Regex\": string} or {\"String\": string}");
    }
    std::string behavior = "Isolated";
    ROOFLINE_RETURN_IF_ERROR(p.opt_string(n, "behavior", path, &behavior));
    if (behavior == "Isolated") {
      split.behavior = SplitBehavior::kIsolated;
    } else if (behavior == "Removed") {
      split.behavior = SplitBehavior::kRemoved;
    } else if (behavior == "MergedWithPrevious") {
      split.behavior = SplitBehavior::kMergedWithPrevious;
    } else if (behavior == "MergedWithNext") {
      split.behavior = SplitBehavior::kMergedWithNext;
    } else if (behavior == "Contiguous") {
      split.behavior = SplitBehavior::kContiguous;
    } else {
      return p.unsupported("Split behavior '" + behavior + "'");
    }
    bool invert = false;
    ROOFLINE_RETURN_IF_ERROR(p.opt_bool(n, "invert", path, &invert));
    if (invert) return p.unsupported("Split with invert = true");
    spec->splits.push_back(std::move(split));
    return ok_status();
  }
  if (type == "Digits") {
    bool individual = false;
    ROOFLINE_RETURN_IF_ERROR(p.opt_bool(n, "individual_digits", path, &individual));
    spec->splits.push_back(
        {"\\p{N}", individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous, false});
    return ok_status();
  }
  if (type == "Metaspace") {
    std::string replacement = kMetaspace, scheme = "always";
    ROOFLINE_RETURN_IF_ERROR(p.opt_string(n, "replacement", path, &replacement));
    if (replacement != kMetaspace)
      return p.unsupported("Metaspace replacement '" + replacement + "'");
    bool add_prefix_space = true, has_scheme = false;
    ROOFLINE_RETURN_IF_ERROR(p.opt_string(n, "prepend_scheme", path, &scheme, &has_scheme));
    if (!has_scheme) {
      ROOFLINE_RETURN_IF_ERROR(p.opt_bool(n, "add_prefix_space", path, &add_prefix_space));
      scheme = add_prefix_space ? "always" : "never";
    }
    bool split = true;
    ROOFLINE_RETURN_IF_ERROR(p.opt_bool(n, "split", path, &split));
    st->metaspace = true;
    spec->replace_spaces = true;
    spec->split_on_prefix = split;
    spec->prefix_space_if_missing = true;
    if (scheme == "always") {
      spec->prefix_space = PrefixSpace::kEverySegment;
    } else if (scheme == "first") {
      spec->prefix_space = PrefixSpace::kFirstSegment;
    } else if (scheme == "never") {
      spec->prefix_space = PrefixSpace::kNone;
    } else {
      return p.unsupported("Metaspace prepend_scheme '" + scheme + "'");
    }
    return ok_status();
  }
  if (type.empty()) return p.wrong_type(path + ".type", "a string");
  return p.unsupported("pre_tokenizer '" + type + "'");
}

Status parse_decoder(const Parser& p, const json& n, const std::string& path, TokenizerSpec* spec) {
  if (n.is_null()) return ok_status();
  if (!n.is_object()) return p.wrong_type(path, "an object or null");
  std::string type;
  ROOFLINE_RETURN_IF_ERROR(p.opt_string(n, "type", path, &type));
  if (type == "Sequence") {
    auto it = n.find("decoders");
    if (it == n.end() || !it->is_array()) return p.wrong_type(path + ".decoders", "an array");
    for (size_t i = 0; i < it->size(); ++i) {
      ROOFLINE_RETURN_IF_ERROR(
          parse_decoder(p, (*it)[i], path + ".decoders[" + std::to_string(i) + "]", spec));
    }
    return ok_status();
  }
  // Replace('▁' -> ' '), ByteFallback and Fuse are what decode() does for every SentencePiece
  // vocabulary; ByteLevel is what it does for byte-level ones.
  if (type == "ByteLevel" || type == "Replace" || type == "ByteFallback" || type == "Fuse") {
    return ok_status();
  }
  if (type == "Strip") {
    std::string content;
    int64_t start = 0, stop = 0;
    ROOFLINE_RETURN_IF_ERROR(p.opt_string(n, "content", path, &content));
    ROOFLINE_RETURN_IF_ERROR(p.opt_int(n, "start", path, &start));
    ROOFLINE_RETURN_IF_ERROR(p.opt_int(n, "stop", path, &stop));
    if (content != " " || start > 1 || stop != 0) {
      return p.unsupported("decoder Strip('" + content + "', " + std::to_string(start) + ", " +
                           std::to_string(stop) + ")");
    }
    spec->decode_strip_leading_space = start == 1;
    return ok_status();
  }
  if (type == "Metaspace") {
    std::string scheme = "always";
    bool has_scheme = false, add_prefix_space = true;
    ROOFLINE_RETURN_IF_ERROR(p.opt_string(n, "prepend_scheme", path, &scheme, &has_scheme));
    if (!has_scheme)
      ROOFLINE_RETURN_IF_ERROR(p.opt_bool(n, "add_prefix_space", path, &add_prefix_space));
    spec->decode_strip_leading_space = has_scheme ? scheme != "never" : add_prefix_space;
    return ok_status();
  }
  if (type.empty()) return p.wrong_type(path + ".type", "a string");
  return p.unsupported("decoder '" + type + "'");
}

Status parse_post_processor(const Parser& p, const json& n, const std::string& path,
                            JsonState* st) {
  if (n.is_null()) return ok_status();
  if (!n.is_object()) return p.wrong_type(path, "an object or null");
  std::string type;
  ROOFLINE_RETURN_IF_ERROR(p.opt_string(n, "type", path, &type));
  if (type == "Sequence") {
    auto it = n.find("processors");
    if (it == n.end() || !it->is_array()) return p.wrong_type(path + ".processors", "an array");
    for (size_t i = 0; i < it->size(); ++i) {
      ROOFLINE_RETURN_IF_ERROR(
          parse_post_processor(p, (*it)[i], path + ".processors[" + std::to_string(i) + "]", st));
    }
    return ok_status();
  }
  if (type == "ByteLevel") return ok_status();  // only adjusts offsets
  if (type == "TemplateProcessing") {
    auto single = n.find("single");
    if (single == n.end() || !single->is_array()) return p.wrong_type(path + ".single", "an array");
    st->template_seen = true;
    auto special_name = [](const json& piece) -> std::string {
      if (piece.is_object() && piece.contains("SpecialToken") &&
          piece["SpecialToken"].is_object() && piece["SpecialToken"].contains("id") &&
          piece["SpecialToken"]["id"].is_string()) {
        return piece["SpecialToken"]["id"].get<std::string>();
      }
      return std::string();
    };
    if (!single->empty()) {
      st->bos_token = special_name(single->front());
      if (single->size() > 1) st->eos_token = special_name(single->back());
    }
    return ok_status();
  }
  if (type.empty()) return p.wrong_type(path + ".type", "a string");
  return p.unsupported("post_processor '" + type + "'");
}

// A token named in tokenizer_config.json: a string or {"content": string}.
Status config_token(const Parser& p, const json& cfg, const char* key, std::string* out) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return ok_status();
  if (it->is_string()) {
    *out = it->get<std::string>();
  } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    *out = (*it)["content"].get<std::string>();
  } else {
    return p.wrong_type(std::string("tokenizer_config.json: ") + key,
                        "a string or {\"content\": string}");
  }
  return ok_status();
}

Status parse_tokenizer_json_impl(std::string_view tokenizer_json, std::string_view config_json,
                                 std::string_view generation_json, const std::string& source,
                                 TokenizerSpec* spec) {
  Parser p{source};
  spec->source = source;
  spec->replace_spaces = false;
  ROOFLINE_ASSIGN_OR_RETURN(json root, parse_json(tokenizer_json, source));
  if (!root.is_object()) return p.wrong_type("(root)", "an object");
  auto model_it = root.find("model");
  if (model_it == root.end() || !model_it->is_object()) return p.wrong_type("model", "an object");
  const json& model = *model_it;
  std::string model_type = "BPE";
  ROOFLINE_RETURN_IF_ERROR(p.opt_string(model, "type", "model", &model_type));
  if (model_type != "BPE") {
    return p.unsupported("model type '" + model_type + "' (only BPE models are)");
  }
  if (model.contains("dropout") && !model["dropout"].is_null()) {
    return p.unsupported("BPE dropout");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    std::string value;
    ROOFLINE_RETURN_IF_ERROR(p.opt_string(model, key, "model", &value));
    if (!value.empty()) return p.unsupported(std::string("BPE ") + key + " '" + value + "'");
  }
  ROOFLINE_RETURN_IF_ERROR(p.opt_bool(model, "byte_fallback", "model", &spec->byte_fallback));
  ROOFLINE_RETURN_IF_ERROR(p.opt_bool(model, "fuse_unk", "model", &spec->fuse_unk));
  ROOFLINE_RETURN_IF_ERROR(p.opt_bool(model, "ignore_merges", "model", &spec->ignore_merges));

  // Vocabulary and added tokens share one id space.
  auto vocab_it = model.find("vocab");
  if (vocab_it == model.end() || !vocab_it->is_object()) {
    return p.wrong_type("model.vocab", "an object of token -> id");
  }
  json added_json = json::array();
  if (root.contains("added_tokens") && !root["added_tokens"].is_null()) {
    added_json = root["added_tokens"];
    if (!added_json.is_array()) return p.wrong_type("added_tokens", "an array");
  }
  const int64_t max_ids = static_cast<int64_t>(vocab_it->size() + added_json.size());
  if (max_ids > kMaxVocabSize) {
    return invalid_argument(source + ": " + std::to_string(max_ids) +
                            " tokens exceed roofline's limit of " + std::to_string(kMaxVocabSize));
  }
  int64_t size = 0;
  std::vector<std::string> by_id(static_cast<size_t>(max_ids));
  for (auto it = vocab_it->begin(); it != vocab_it->end(); ++it) {
    if (!it.value().is_number_integer()) {
      return p.wrong_type("model.vocab[\"" + it.key() + "\"]", "an integer id");
    }
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id >= max_ids) {
      return out_of_range(source + ": token '" + it.key() + "' has id " + std::to_string(id) +
                          ", outside 0.." + std::to_string(max_ids - 1) +
                          " (vocab plus added tokens); the file is corrupt");
    }
    if (it.key().empty()) return invalid_argument(source + ": model.vocab has an empty token");
    if (!by_id[id].empty()) {
      return invalid_argument(source + ": id " + std::to_string(id) + " is used by both '" +
                              by_id[id] + "' and '" + it.key() + "' in model.vocab");
    }
    by_id[id] = it.key();
    size = std::max(size, id + 1);
  }
  for (size_t i = 0; i < added_json.size(); ++i) {
    const json& t = added_json[i];
    const std::string path = "added_tokens[" + std::to_string(i) + "]";
    if (!t.is_object()) return p.wrong_type(path, "an object");
    AddedToken added;
    int64_t id = -1;
    ROOFLINE_RETURN_IF_ERROR(p.opt_int(t, "id", path, &id));
    bool has_content = false;
    ROOFLINE_RETURN_IF_ERROR(p.opt_string(t, "content", path, &added.content, &has_content));
    if (!has_content || added.content.empty())
      return p.wrong_type(path + ".content", "a non-empty string");
    if (id < 0 || id >= max_ids) {
      return out_of_range(source + ": added token '" + added.content + "' has id " +
                          std::to_string(id) + ", outside 0.." + std::to_string(max_ids - 1));
    }
    added.id = static_cast<int32_t>(id);
    ROOFLINE_RETURN_IF_ERROR(p.opt_bool(t, "special", path, &added.special));
    ROOFLINE_RETURN_IF_ERROR(p.opt_bool(t, "lstrip", path, &added.lstrip));
    ROOFLINE_RETURN_IF_ERROR(p.opt_bool(t, "rstrip", path, &added.rstrip));
    ROOFLINE_RETURN_IF_ERROR(p.opt_bool(t, "single_word", path, &added.single_word));
    size = std::max(size, id + 1);
    spec->added_tokens.push_back(std::move(added));
  }
  by_id.resize(static_cast<size_t>(size));
  spec->vocab = std::move(by_id);

  auto lookup = [&](const std::string& token) -> int32_t {
    for (const AddedToken& t : spec->added_tokens) {
      if (t.content == token) return t.id;
    }
    for (size_t id = 0; id < spec->vocab.size(); ++id) {
      if (spec->vocab[id] == token) return static_cast<int32_t>(id);
    }
    return -1;
  };

  auto merges_it = model.find("merges");
  if (merges_it != model.end() && !merges_it->is_null()) {
    if (!merges_it->is_array()) return p.wrong_type("model.merges", "an array");
    spec->merges.reserve(merges_it->size());
    for (size_t i = 0; i < merges_it->size(); ++i) {
      const json& m = (*merges_it)[i];
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const size_t space = s.find(' ');
        if (space == std::string::npos || space == 0 || space + 1 >= s.size() ||
            s.find(' ', space + 1) != std::string::npos) {
          return invalid_argument(source + ": merge #" + std::to_string(i) + " '" + s +
                                  "' is not two tokens separated by one space");
        }
        spec->merges.emplace_back(s.substr(0, space), s.substr(space + 1));
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        spec->merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      } else {
        return p.wrong_type("model.merges[" + std::to_string(i) + "]", "\"a b\" or [\"a\", \"b\"]");
      }
    }
  }

  std::string unk;
  ROOFLINE_RETURN_IF_ERROR(p.opt_string(model, "unk_token", "model", &unk));
  if (!unk.empty()) {
    spec->unk_id = lookup(unk);
    if (spec->unk_id < 0) {
      return invalid_argument(source + ": model.unk_token '" + unk + "' is not in the vocabulary");
    }
  }

  JsonState st;
  if (root.contains("normalizer")) {
    ROOFLINE_RETURN_IF_ERROR(parse_normalizer(p, root["normalizer"], "normalizer", &st));
  }
  if (root.contains("pre_tokenizer")) {
    ROOFLINE_RETURN_IF_ERROR(
        parse_pre_tokenizer(p, root["pre_tokenizer"], "pre_tokenizer", &st, spec));
  }
  if (root.contains("decoder")) {
    ROOFLINE_RETURN_IF_ERROR(parse_decoder(p, root["decoder"], "decoder", spec));
  }
  if (root.contains("post_processor")) {
    ROOFLINE_RETURN_IF_ERROR(
        parse_post_processor(p, root["post_processor"], "post_processor", &st));
  }
  if (st.byte_level) {
    spec->kind = TokenizerKind::kByteLevelBpe;
    if (!st.byte_level_last) return p.unsupported("a pre-tokenizer after ByteLevel");
    if (st.prepend || st.replace || st.metaspace) {
      return p.unsupported("a SentencePiece normaliser or Metaspace together with ByteLevel");
    }
  } else {
    spec->kind = TokenizerKind::kSentencePieceBpe;
    if (!spec->splits.empty())
      return p.unsupported("Split/Digits pre-tokenizers without ByteLevel");
    if (st.replace) spec->replace_spaces = true;
    if (st.prepend) {
      spec->prefix_space = PrefixSpace::kEverySegment;
      spec->prefix_space_if_missing = false;
      spec->split_on_prefix = st.metaspace && spec->split_on_prefix;
    }
  }

  // BOS/EOS: the post-processor decides what encode adds (as tokenizers does); the config names
  // them when the template does not.
  std::string bos = st.bos_token, eos = st.eos_token;
  spec->add_bos = !bos.empty();
  spec->add_eos = !eos.empty();
  if (!config_json.empty()) {
    Parser cp{source + " (tokenizer_config.json)"};
    ROOFLINE_ASSIGN_OR_RETURN(json cfg, parse_json(config_json, cp.source));
    if (!cfg.is_object()) return cp.wrong_type("(root)", "an object");
    std::string cfg_bos, cfg_eos;
    ROOFLINE_RETURN_IF_ERROR(config_token(cp, cfg, "bos_token", &cfg_bos));
    ROOFLINE_RETURN_IF_ERROR(config_token(cp, cfg, "eos_token", &cfg_eos));
    if (bos.empty()) bos = cfg_bos;
    if (!cfg_eos.empty()) eos = cfg_eos;
    if (!st.template_seen) {
      ROOFLINE_RETURN_IF_ERROR(cp.opt_bool(cfg, "add_bos_token", "", &spec->add_bos));
      ROOFLINE_RETURN_IF_ERROR(cp.opt_bool(cfg, "add_eos_token", "", &spec->add_eos));
    }
    auto tmpl = cfg.find("chat_template");
    if (tmpl != cfg.end() && !tmpl->is_null()) {
      if (tmpl->is_string()) {
        spec->chat_template = tmpl->get<std::string>();
      } else if (tmpl->is_array()) {
        for (const json& t : *tmpl) {
          if (!t.is_object() || !t.contains("name") || !t["name"].is_string() ||
              !t.contains("template") || !t["template"].is_string()) {
            return cp.wrong_type("chat_template[]", "{\"name\": string, \"template\": string}");
          }
          if (t["name"].get<std::string>() == "default") {
            spec->chat_template = t["template"].get<std::string>();
          }
        }
      } else {
        return cp.wrong_type("chat_template", "a string or a list of {name, template}");
      }
    }
  }
  if (!bos.empty()) {
    spec->bos_id = lookup(bos);
    if (spec->bos_id < 0)
      return invalid_argument(source + ": bos token '" + bos + "' is not in the vocabulary");
  }
  if (!eos.empty()) {
    spec->eos_id = lookup(eos);
    if (spec->eos_id < 0)
      return invalid_argument(source + ": eos token '" + eos + "' is not in the vocabulary");
  }
  if (spec->add_bos && spec->bos_id < 0) spec->add_bos = false;
  if (spec->add_eos && spec->eos_id < 0) spec->add_eos = false;

  if (!generation_json.empty()) {
    Parser gp{source + " (generation_config.json)"};
    ROOFLINE_ASSIGN_OR_RETURN(json gen, parse_json(generation_json, gp.source));
    if (gen.is_object() && gen.contains("eos_token_id") && !gen["eos_token_id"].is_null()) {
      const json& e = gen["eos_token_id"];
      const json list = e.is_array() ? e : json::array({e});
      for (const json& id : list) {
        if (!id.is_number_integer())
          return gp.wrong_type("eos_token_id", "an integer or a list of integers");
        const int64_t v = id.get<int64_t>();
        if (v < 0 || v >= static_cast<int64_t>(spec->vocab.size())) {
          return out_of_range(gp.source + ": eos_token_id " + std::to_string(v) +
                              " is outside the vocabulary of " +
                              std::to_string(spec->vocab.size()));
        }
        spec->extra_eos_ids.push_back(static_cast<int32_t>(v));
      }
    }
  }
  return ok_status();
}

// Reads an optional GGUF token id, range-checked against the vocabulary.
Status gguf_token_id(const GgufFile& gguf, const std::string& key, size_t vocab_size,
                     int32_t* out) {
  if (!gguf.has(key)) return ok_status();
  ROOFLINE_ASSIGN_OR_RETURN(int64_t id, gguf.get_int(key));
  if (id < 0 || id >= static_cast<int64_t>(vocab_size)) {
    return out_of_range(gguf.source() + ": " + key + " = " + std::to_string(id) +
                        " is outside the vocabulary of " + std::to_string(vocab_size) + " tokens");
  }
  *out = static_cast<int32_t>(id);
  return ok_status();
}

Status gguf_bool(const GgufFile& gguf, const std::string& key, bool* out) {
  if (!gguf.has(key)) return ok_status();
  ROOFLINE_ASSIGN_OR_RETURN(*out, gguf.get_bool(key));
  return ok_status();
}

}  // namespace

StatusOr<TokenizerSpec> parse_tokenizer_json(std::string_view tokenizer_json,
                                             std::string_view tokenizer_config_json,
                                             std::string_view generation_config_json,
                                             const std::string& source) {
  TokenizerSpec spec;
  try {
    ROOFLINE_RETURN_IF_ERROR(parse_tokenizer_json_impl(tokenizer_json, tokenizer_config_json,
                                                       generation_config_json, source, &spec));
  } catch (const json::exception& e) {
    // Every access above is type-checked first; this is the net for anything missed.
    return invalid_argument(source + ": unexpected JSON structure (" + e.what() + ")");
  }
  return spec;
}

StatusOr<TokenizerSpec> load_tokenizer_json(const std::string& model_dir) {
  const std::string path = model_dir + "/tokenizer.json";
  bool exists = false;
  ROOFLINE_ASSIGN_OR_RETURN(std::string text, read_text_file(path, &exists));
  if (!exists) {
    return not_found(path +
                     " does not exist: the model directory needs the tokenizer.json of its "
                     "Hugging Face repository (or load the model from a GGUF file)");
  }
  bool unused = false;
  ROOFLINE_ASSIGN_OR_RETURN(std::string config,
                            read_text_file(model_dir + "/tokenizer_config.json", &unused));
  ROOFLINE_ASSIGN_OR_RETURN(std::string generation,
                            read_text_file(model_dir + "/generation_config.json", &unused));
  return parse_tokenizer_json(text, config, generation, path);
}

StatusOr<std::vector<RegexSplit>> gguf_pre_tokenizer_splits(const std::string& name,
                                                            bool* ignore_merges) {
  *ignore_merges = false;
  auto isolated = [](const char* pattern) {
    return RegexSplit{pattern, SplitBehavior::kIsolated, false};
  };
  if (name.empty() || name == "default" || name == "gpt-2" || name == "gpt2") {
    return std::vector<RegexSplit>{isolated(kGpt2Regex)};
  }
  if (name == "smollm") return std::vector<RegexSplit>{isolated("\\p{N}"), isolated(kGpt2Regex)};
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") {
    *ignore_merges = true;
    return std::vector<RegexSplit>{isolated(kLlama3Regex)};
  }
  if (name == "dbrx" || name == "smaug-bpe" || name == "falcon3") {
    return std::vector<RegexSplit>{isolated(kLlama3Regex)};
  }
  if (name == "qwen2" || name == "deepseek-r1-qwen") {
    return std::vector<RegexSplit>{isolated(kQwen2Regex)};
  }
  return unimplemented("GGUF pre-tokenizer '" + name +
                       "' is not known to roofline (known: default, gpt-2, smollm, llama-bpe, "
                       "llama3, dbrx, smaug-bpe, falcon3, qwen2, deepseek-r1-qwen)");
}

StatusOr<TokenizerSpec> tokenizer_spec_from_gguf(const GgufFile& gguf) {
  const std::string& src = gguf.source();
  TokenizerSpec spec;
  spec.source = src;
  if (!gguf.has("tokenizer.ggml.model")) {
    return not_found(src +
                     " has no tokenizer (tokenizer.ggml.model is missing); use the model's "
                     "Hugging Face directory with tokenizer.json instead");
  }
  ROOFLINE_ASSIGN_OR_RETURN(std::string model, gguf.get_string("tokenizer.ggml.model"));
  ROOFLINE_ASSIGN_OR_RETURN(spec.vocab, gguf.get_string_array("tokenizer.ggml.tokens"));
  const size_t n = spec.vocab.size();
  if (n == 0 || static_cast<int64_t>(n) > kMaxVocabSize) {
    return invalid_argument(src + ": tokenizer.ggml.tokens has " + std::to_string(n) +
                            " tokens; expected 1.." + std::to_string(kMaxVocabSize));
  }
  std::vector<int64_t> types;
  if (gguf.has("tokenizer.ggml.token_type")) {
    ROOFLINE_ASSIGN_OR_RETURN(types, gguf.get_int_array("tokenizer.ggml.token_type"));
    if (types.size() != n) {
      return invalid_argument(src + ": tokenizer.ggml.token_type has " +
                              std::to_string(types.size()) + " entries for " + std::to_string(n) +
                              " tokens");
    }
  }
  bool is_llama = false;
  if (model == "gpt2") {
    spec.kind = TokenizerKind::kByteLevelBpe;
    std::string pre;
    if (gguf.has("tokenizer.ggml.pre")) {
      ROOFLINE_ASSIGN_OR_RETURN(pre, gguf.get_string("tokenizer.ggml.pre"));
    }
    auto splits = gguf_pre_tokenizer_splits(pre, &spec.ignore_merges);
    if (!splits.ok()) return splits.status().with_context(src);
    spec.splits = std::move(splits).value();
  } else if (model == "llama") {
    is_llama = true;
    spec.kind = TokenizerKind::kSentencePieceBpe;
    spec.byte_fallback = true;
    spec.replace_spaces = true;
  } else {
    return unimplemented(src + ": tokenizer.ggml.model '" + model +
                         "' is not supported (roofline reads 'gpt2' byte-level BPE and 'llama' "
                         "SentencePiece BPE)");
  }
  if (gguf.has("tokenizer.ggml.merges")) {
    ROOFLINE_ASSIGN_OR_RETURN(std::vector<std::string> merges,
                              gguf.get_string_array("tokenizer.ggml.merges"));
    spec.merges.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      const size_t space = merges[i].find(' ', 1);
      if (space == std::string::npos || space + 1 >= merges[i].size()) {
        return invalid_argument(src + ": tokenizer.ggml.merges[" + std::to_string(i) + "] '" +
                                merges[i] + "' is not two tokens separated by a space");
      }
      spec.merges.emplace_back(merges[i].substr(0, space), merges[i].substr(space + 1));
    }
  } else if (!is_llama) {
    return invalid_argument(src + ": a 'gpt2' tokenizer needs tokenizer.ggml.merges");
  }
  if (is_llama && spec.merges.empty()) {
    if (!gguf.has("tokenizer.ggml.scores")) {
      return invalid_argument(src + ": a 'llama' tokenizer needs tokenizer.ggml.scores or merges");
    }
    ROOFLINE_ASSIGN_OR_RETURN(std::vector<double> scores,
                              gguf.get_float_array("tokenizer.ggml.scores"));
    if (scores.size() != n) {
      return invalid_argument(src + ": tokenizer.ggml.scores has " + std::to_string(scores.size()) +
                              " entries for " + std::to_string(n) + " tokens");
    }
    spec.scores.assign(scores.begin(), scores.end());
  }

  // Token types (llama.cpp): 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
  // Control and unknown tokens are special; user-defined ones are matched in text but decoded.
  for (size_t id = 0; id < types.size(); ++id) {
    const int64_t t = types[id];
    if ((t == 2 || t == 3 || t == 4) && !spec.vocab[id].empty()) {
      AddedToken added;
      added.id = static_cast<int32_t>(id);
      added.content = spec.vocab[id];
      added.special = t != 4;
      spec.added_tokens.push_back(std::move(added));
    }
  }
  ROOFLINE_RETURN_IF_ERROR(gguf_token_id(gguf, "tokenizer.ggml.bos_token_id", n, &spec.bos_id));
  ROOFLINE_RETURN_IF_ERROR(gguf_token_id(gguf, "tokenizer.ggml.eos_token_id", n, &spec.eos_id));
  ROOFLINE_RETURN_IF_ERROR(gguf_token_id(gguf, "tokenizer.ggml.unknown_token_id", n, &spec.unk_id));
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    int32_t id = -1;
    ROOFLINE_RETURN_IF_ERROR(gguf_token_id(gguf, key, n, &id));
    if (id >= 0) spec.extra_eos_ids.push_back(id);
  }
  spec.add_bos = is_llama;  // llama.cpp's defaults when the flags are absent
  spec.add_eos = false;
  bool add_space_prefix = is_llama;
  ROOFLINE_RETURN_IF_ERROR(gguf_bool(gguf, "tokenizer.ggml.add_bos_token", &spec.add_bos));
  ROOFLINE_RETURN_IF_ERROR(gguf_bool(gguf, "tokenizer.ggml.add_eos_token", &spec.add_eos));
  ROOFLINE_RETURN_IF_ERROR(gguf_bool(gguf, "tokenizer.ggml.add_space_prefix", &add_space_prefix));
  if (spec.add_bos && spec.bos_id < 0) {
    return invalid_argument(src +
                            ": add_bos_token is set but tokenizer.ggml.bos_token_id is missing");
  }
  if (spec.add_eos && spec.eos_id < 0) {
    return invalid_argument(src +
                            ": add_eos_token is set but tokenizer.ggml.eos_token_id is missing");
  }
  if (add_space_prefix) {
    if (is_llama) {
      spec.prefix_space = PrefixSpace::kEverySegment;
      spec.decode_strip_leading_space = true;
    } else {
      spec.prefix_space = PrefixSpace::kEverySegment;
      spec.prefix_space_if_missing = true;
    }
  }
  if (gguf.has("tokenizer.chat_template")) {
    ROOFLINE_ASSIGN_OR_RETURN(spec.chat_template, gguf.get_string("tokenizer.chat_template"));
  }
  return spec;
}

}  // namespace roofline
