// Tokenizer: validation of a TokenizerSpec, the encode pipeline (repair UTF-8 -> cut out added
// tokens -> normalise / pre-tokenise each segment -> BPE each word) and decoding (see tokenizer.h).
//
// Hugging Face semantics followed here, because the goldens come from it:
//  - added tokens are found leftmost-longest in the raw text; a match that fails single_word is
//    skipped whole (no shorter match is tried at its position); lstrip / rstrip swallow Unicode
//    whitespace next to the match, never past the previous match;
//  - every segment between added tokens is normalised and pre-tokenised on its own (so a Prepend
//    normaliser puts '▁' after every special token; Metaspace "first" only at offset 0);
//  - decoding concatenates each token's bytes (byte-level: inverse byte map; SentencePiece: '▁' ->
//    ' ', <0xNN> -> the byte; added tokens: their text) and repairs the result to valid UTF-8.
//    Unlike HF's ByteFallback decoder, which replaces each byte of an invalid run of byte tokens
//    with U+FFFD, we replace each maximal invalid subpart (fewer U+FFFD for truncated characters);
//    valid output is identical.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <unordered_map>

#include "tokenizer/bpe.h"
#include "tokenizer/regex_split.h"
#include "tokenizer/utf8.h"

namespace roofline {

namespace {

constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581 '▁'
// Words up to this many bytes are cached; longer ones are rare and would bloat the cache.
constexpr size_t kMaxCachedWordBytes = 128;
// The cache is dropped when it reaches this many words, bounding memory on adversarial input.
constexpr size_t kMaxCachedWords = 1 << 16;
// Ids are int32 and tables are indexed by them: a bigger vocabulary is a corrupt file.
constexpr size_t kMaxVocabSize = size_t{1} << 24;

// GPT-2's byte alphabet: printable bytes stand for themselves, the others are shifted to
// U+0100 + n so that every byte is a visible, non-whitespace character.
std::array<uint32_t, 256> byte_to_code_point() {
  std::array<uint32_t, 256> table{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    table[b] = printable ? b : next++;
  }
  return table;
}

// "<0x0A>" -> 10, or -1.
int parse_byte_token(std::string_view token) {
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return -1;
  int value = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = token[i];
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return -1;
    }
    value = value * 16 + digit;
  }
  return value;
}

// Code point ending at text[end) (text valid UTF-8, end > 0); *begin receives its start.
uint32_t code_point_before(std::string_view text, size_t end, size_t* begin) {
  size_t b = end - 1;
  while (b > 0 && (static_cast<uint8_t>(text[b]) & 0xC0) == 0x80) --b;
  size_t len = 0;
  *begin = b;
  return utf8::decode(text, b, &len);
}

struct Segment {
  size_t begin;
  size_t end;
  int32_t added_id;  // -1: ordinary text
};

}  // namespace

struct Tokenizer::Impl {
  TokenizerSpec spec;
  VocabIndex vocab_index;
  BpeMerges merges;
  std::vector<std::unique_ptr<RegexSplitter>> splitters;
  std::array<std::string, 256> byte_spelling;  // byte-level: UTF-8 of each byte's alphabet char
  std::array<int32_t, 256> byte_token{};       // byte-level: id of that char; SP: id of <0xNN>
  std::vector<std::string> token_bytes;        // [vocab_size] what each id decodes to
  std::vector<uint8_t> special;                // [vocab_size] 1 for control tokens
  std::vector<AddedToken> added;               // sorted longest first
  std::array<std::vector<int32_t>, 256> added_by_first_byte;  // indices into `added`
  std::vector<int32_t> eos_ids;

  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

  Status build();
  std::vector<Segment> split_added(std::string_view text) const;
  void encode_segment(std::string_view text, bool at_start, std::vector<int32_t>* ids) const;
  void encode_byte_level_word(std::string_view word, std::vector<int32_t>* ids) const;
  void encode_sentencepiece_word(std::string_view word, std::vector<int32_t>* ids) const;
  void push_unknown(std::vector<int32_t>* ids, bool* last_unk) const;
};

Status Tokenizer::Impl::build() {
  const std::string& src = spec.source.empty() ? std::string("tokenizer spec") : spec.source;
  const size_t n = spec.vocab.size();
  if (n == 0) return invalid_argument(src + ": the vocabulary is empty");
  if (n > kMaxVocabSize) {
    return invalid_argument(src + ": vocabulary of " + std::to_string(n) +
                            " tokens exceeds the limit of " + std::to_string(kMaxVocabSize) +
                            "; the file is corrupt");
  }
  if (!spec.scores.empty() && spec.scores.size() != n) {
    return invalid_argument(src + ": " + std::to_string(spec.scores.size()) + " scores for " +
                            std::to_string(n) + " tokens; they must match one to one");
  }
  auto check_id = [&](int32_t id, const char* what) -> Status {
    if (id < -1 || id >= static_cast<int64_t>(n)) {
      return out_of_range(src + ": " + what + " id " + std::to_string(id) +
                          " is outside the vocabulary of " + std::to_string(n) + " tokens");
    }
    return ok_status();
  };
  ROOFLINE_RETURN_IF_ERROR(check_id(spec.bos_id, "bos"));
  ROOFLINE_RETURN_IF_ERROR(check_id(spec.eos_id, "eos"));
  ROOFLINE_RETURN_IF_ERROR(check_id(spec.unk_id, "unk"));
  for (int32_t id : spec.extra_eos_ids) ROOFLINE_RETURN_IF_ERROR(check_id(id, "stop token"));
  if (spec.add_bos && spec.bos_id < 0) {
    return invalid_argument(src + ": add_bos is set but there is no bos token id");
  }
  if (spec.add_eos && spec.eos_id < 0) {
    return invalid_argument(src + ": add_eos is set but there is no eos token id");
  }

  // Added tokens take their vocabulary slot (tokenizer.json lists many only under added_tokens).
  special.assign(n, 0);
  std::vector<uint8_t> is_added(n, 0);
  for (const AddedToken& t : spec.added_tokens) {
    if (t.id < 0 || t.id >= static_cast<int64_t>(n)) {
      return out_of_range(src + ": added token '" + t.content + "' has id " + std::to_string(t.id) +
                          " outside the vocabulary of " + std::to_string(n) + " tokens");
    }
    if (t.content.empty()) {
      return invalid_argument(src + ": added token " + std::to_string(t.id) + " has empty content");
    }
    std::string& slot = spec.vocab[t.id];
    if (slot.empty()) {
      slot = t.content;
    } else if (slot != t.content) {
      return invalid_argument(src + ": id " + std::to_string(t.id) + " is both '" + slot +
                              "' in the vocabulary and added token '" + t.content + "'");
    }
    special[t.id] = t.special ? 1 : 0;
    is_added[t.id] = 1;
  }
  // First id wins for a repeated token text (some GGUF vocabularies repeat padding tokens).
  for (size_t id = 0; id < n; ++id) {
    if (!spec.vocab[id].empty()) vocab_index.insert(spec.vocab[id], static_cast<int32_t>(id));
  }

  for (size_t i = 0; i < spec.merges.size(); ++i) {
    const auto& [left, right] = spec.merges[i];
    const int32_t l = vocab_index.find(left), r = vocab_index.find(right);
    const std::string merged = left + right;
    const int32_t m = vocab_index.find(merged);
    if (l < 0 || r < 0 || m < 0) {
      const std::string& missing = l < 0 ? left : (r < 0 ? right : merged);
      return invalid_argument(src + ": merge #" + std::to_string(i) + " '" + left + " " + right +
                              "' refers to '" + missing +
                              "', which is not in the vocabulary; the merges and the vocabulary "
                              "do not belong together");
    }
    merges.add(l, r, m);
  }
  if (spec.kind == TokenizerKind::kSentencePieceBpe && spec.merges.empty() && spec.scores.empty() &&
      n > 1) {
    return invalid_argument(src +
                            ": a SentencePiece-style vocabulary needs merges or scores, and "
                            "this one has neither");
  }

  for (const RegexSplit& split : spec.splits) {
    auto splitter = RegexSplitter::create(split);
    if (!splitter.ok()) return splitter.status().with_context(src);
    splitters.push_back(std::move(splitter).value());
  }

  // What every id decodes to.
  token_bytes.assign(n, std::string());
  byte_token.fill(-1);
  if (spec.kind == TokenizerKind::kByteLevelBpe) {
    const auto cps = byte_to_code_point();
    std::unordered_map<uint32_t, uint8_t> inverse;
    for (uint32_t b = 0; b < 256; ++b) {
      utf8::append(cps[b], &byte_spelling[b]);
      byte_token[b] = vocab_index.find(byte_spelling[b]);
      inverse[cps[b]] = static_cast<uint8_t>(b);
    }
    for (size_t id = 0; id < n; ++id) {
      const std::string& token = spec.vocab[id];
      if (is_added[id]) {
        token_bytes[id] = token;
        continue;
      }
      std::string bytes;
      bool mapped = utf8::is_valid(token);
      for (size_t pos = 0; mapped && pos < token.size();) {
        size_t len = 0;
        auto it = inverse.find(utf8::decode(token, pos, &len));
        if (it == inverse.end()) {
          mapped = false;
        } else {
          bytes.push_back(static_cast<char>(it->second));
        }
        pos += len;
      }
      // A token outside the byte alphabet is its own text (as HF's ByteLevel decoder does).
      token_bytes[id] = mapped ? bytes : token;
    }
  } else {
    for (size_t id = 0; id < n; ++id) {
      const std::string& token = spec.vocab[id];
      if (is_added[id]) {
        token_bytes[id] = token;
        continue;
      }
      const int byte = parse_byte_token(token);
      if (byte >= 0) {
        token_bytes[id] = std::string(1, static_cast<char>(byte));
        if (byte_token[byte] < 0) byte_token[byte] = static_cast<int32_t>(id);
        continue;
      }
      std::string text;
      for (size_t pos = 0; pos < token.size();) {
        if (token.compare(pos, kMetaspace.size(), kMetaspace) == 0) {
          text.push_back(' ');
          pos += kMetaspace.size();
        } else {
          text.push_back(token[pos++]);
        }
      }
      token_bytes[id] = std::move(text);
    }
  }

  added = spec.added_tokens;
  std::stable_sort(added.begin(), added.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
  for (size_t i = 0; i < added.size(); ++i) {
    added_by_first_byte[static_cast<uint8_t>(added[i].content[0])].push_back(
        static_cast<int32_t>(i));
  }

  if (spec.eos_id >= 0) eos_ids.push_back(spec.eos_id);
  for (int32_t id : spec.extra_eos_ids) {
    if (id >= 0 && std::find(eos_ids.begin(), eos_ids.end(), id) == eos_ids.end()) {
      eos_ids.push_back(id);
    }
  }
  return ok_status();
}

std::vector<Segment> Tokenizer::Impl::split_added(std::string_view text) const {
  std::vector<Segment> segments;
  if (added.empty()) {
    if (!text.empty()) segments.push_back({0, text.size(), -1});
    return segments;
  }
  size_t text_begin = 0;  // start of the pending ordinary text
  size_t pos = 0;
  while (pos < text.size()) {
    const AddedToken* hit = nullptr;
    for (int32_t index : added_by_first_byte[static_cast<uint8_t>(text[pos])]) {
      const AddedToken& t = added[index];
      if (text.compare(pos, t.content.size(), t.content) == 0) {
        hit = &t;
        break;  // longest first
      }
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    size_t begin = pos, end = pos + hit->content.size();
    if (hit->single_word) {
      size_t unused = 0;
      const bool word_before = begin > 0 && is_word_char(code_point_before(text, begin, &unused));
      size_t len = 0;
      const bool word_after = end < text.size() && is_word_char(utf8::decode(text, end, &len));
      if (word_before || word_after) {
        pos = end;  // HF drops this match and resumes after it
        continue;
      }
    }
    if (hit->lstrip) {
      while (begin > text_begin) {
        size_t cp_begin = 0;
        if (!utf8::is_whitespace(code_point_before(text, begin, &cp_begin))) break;
        begin = cp_begin;
      }
    }
    if (hit->rstrip) {
      while (end < text.size()) {
        size_t len = 0;
        if (!utf8::is_whitespace(utf8::decode(text, end, &len))) break;
        end += len;
      }
    }
    if (begin > text_begin) segments.push_back({text_begin, begin, -1});
    segments.push_back({begin, end, hit->id});
    text_begin = pos = end;
  }
  if (text_begin < text.size()) segments.push_back({text_begin, text.size(), -1});
  return segments;
}

void Tokenizer::Impl::push_unknown(std::vector<int32_t>* ids, bool* last_unk) const {
  if (spec.unk_id < 0) return;  // HF drops characters it cannot represent when there is no unk
  if (spec.fuse_unk && *last_unk) return;
  ids->push_back(spec.unk_id);
  *last_unk = true;
}

void Tokenizer::Impl::encode_segment(std::string_view text, bool at_start,
                                     std::vector<int32_t>* ids) const {
  const bool prefix = spec.prefix_space == PrefixSpace::kEverySegment ||
                      (spec.prefix_space == PrefixSpace::kFirstSegment && at_start);
  if (spec.kind == TokenizerKind::kByteLevelBpe) {
    std::string prefixed;
    if (prefix && !(spec.prefix_space_if_missing && text[0] == ' ')) {
      prefixed = " ";
      prefixed.append(text);
      text = prefixed;
    }
    std::vector<std::string_view> pieces{text}, next;
    for (const auto& splitter : splitters) {
      next.clear();
      splitter->split(pieces, &next);
      pieces.swap(next);
    }
    for (std::string_view piece : pieces) encode_byte_level_word(piece, ids);
    return;
  }

  std::string normalized;
  normalized.reserve(text.size() + 8);
  for (char c : text) {
    if (c == ' ' && spec.replace_spaces) {
      normalized.append(kMetaspace);
    } else {
      normalized.push_back(c);
    }
  }
  if (prefix && !(spec.prefix_space_if_missing && normalized.starts_with(kMetaspace))) {
    normalized.insert(0, kMetaspace);
  }
  std::string_view view(normalized);
  if (!spec.split_on_prefix) {
    encode_sentencepiece_word(view, ids);
    return;
  }
  size_t begin = 0;
  for (size_t pos = kMetaspace.size(); pos <= view.size();) {
    const size_t next = view.find(kMetaspace, pos);
    const size_t end = next == std::string_view::npos ? view.size() : next;
    if (end > begin) encode_sentencepiece_word(view.substr(begin, end - begin), ids);
    begin = end;
    if (next == std::string_view::npos) break;
    pos = next + kMetaspace.size();
  }
}

void Tokenizer::Impl::encode_byte_level_word(std::string_view word,
                                             std::vector<int32_t>* ids) const {
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex);
    auto it = cache.find(std::string(word));
    if (it != cache.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> out;
  if (spec.ignore_merges) {
    std::string spelled;
    for (char c : word) spelled.append(byte_spelling[static_cast<uint8_t>(c)]);
    const int32_t id = vocab_index.find(spelled);
    if (id >= 0) out.push_back(id);
  }
  if (out.empty()) {
    std::vector<BpeSymbol> symbols;
    symbols.reserve(word.size());
    bool last_unk = false;
    for (size_t i = 0; i < word.size(); ++i) {
      const int32_t id = byte_token[static_cast<uint8_t>(word[i])];
      if (id >= 0) {
        symbols.push_back({id, static_cast<uint32_t>(i), static_cast<uint32_t>(i + 1)});
        last_unk = false;
      } else if (spec.unk_id >= 0 && !(spec.fuse_unk && last_unk)) {
        symbols.push_back({spec.unk_id, static_cast<uint32_t>(i), static_cast<uint32_t>(i + 1)});
        last_unk = true;
      }
    }
    merges.merge_by_rank(&symbols);
    for (const BpeSymbol& s : symbols) out.push_back(s.id);
  }
  ids->insert(ids->end(), out.begin(), out.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (cache.size() >= kMaxCachedWords) cache.clear();
    cache.emplace(std::string(word), std::move(out));
  }
}

void Tokenizer::Impl::encode_sentencepiece_word(std::string_view word,
                                                std::vector<int32_t>* ids) const {
  if (spec.ignore_merges) {
    const int32_t id = vocab_index.find(word);
    if (id >= 0) {
      ids->push_back(id);
      return;
    }
  }
  std::vector<BpeSymbol> symbols;
  symbols.reserve(word.size());
  const bool by_score = merges.empty() && !spec.scores.empty();
  // Byte fallback for one character's bytes; false if some <0xNN> token is missing.
  auto push_bytes = [&](size_t begin, size_t end, std::vector<int32_t>* out) {
    for (size_t b = begin; b < end; ++b) {
      if (byte_token[static_cast<uint8_t>(word[b])] < 0) return false;
    }
    for (size_t b = begin; b < end; ++b) out->push_back(byte_token[static_cast<uint8_t>(word[b])]);
    return true;
  };

  if (by_score) {
    for (size_t pos = 0; pos < word.size();) {
      const size_t len = utf8::sequence_length(word, pos);  // word is valid UTF-8
      symbols.push_back({-1, static_cast<uint32_t>(pos), static_cast<uint32_t>(pos + len)});
      pos += len;
    }
    merge_by_score(word, vocab_index, spec.scores, &symbols);
    bool last_unk = false;
    for (const BpeSymbol& s : symbols) {
      if (s.id >= 0) {
        ids->push_back(s.id);
        last_unk = false;
      } else if (spec.byte_fallback && push_bytes(s.begin, s.end, ids)) {
        last_unk = false;
      } else {
        push_unknown(ids, &last_unk);
      }
    }
    return;
  }

  bool last_unk = false;
  std::vector<int32_t> bytes;
  for (size_t pos = 0; pos < word.size();) {
    const size_t len = utf8::sequence_length(word, pos);
    const auto begin = static_cast<uint32_t>(pos), end = static_cast<uint32_t>(pos + len);
    const int32_t id = vocab_index.find(word.substr(pos, len));
    pos += len;
    if (id >= 0) {
      symbols.push_back({id, begin, end});
      last_unk = false;
      continue;
    }
    bytes.clear();
    if (spec.byte_fallback && push_bytes(begin, end, &bytes)) {
      for (int32_t b : bytes) symbols.push_back({b, begin, end});
      last_unk = false;
      continue;
    }
    if (spec.unk_id < 0) continue;
    if (spec.fuse_unk && last_unk) {
      symbols.back().end = end;
    } else {
      symbols.push_back({spec.unk_id, begin, end});
    }
    last_unk = true;
  }
  merges.merge_by_rank(&symbols);
  for (const BpeSymbol& s : symbols) ids->push_back(s.id);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::create(TokenizerSpec spec) {
  auto impl = std::make_unique<Impl>();
  impl->spec = std::move(spec);
  ROOFLINE_RETURN_IF_ERROR(impl->build());
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const TokenizerSpec& spec = impl_->spec;
  std::string repaired;
  if (!utf8::is_valid(text)) {
    repaired = utf8::sanitize(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (add_special_tokens && spec.add_bos) ids.push_back(spec.bos_id);
  for (const Segment& s : impl_->split_added(text)) {
    if (s.added_id >= 0) {
      ids.push_back(s.added_id);
    } else {
      impl_->encode_segment(text.substr(s.begin, s.end - s.begin), s.begin == 0, &ids);
    }
  }
  if (add_special_tokens && spec.add_eos) ids.push_back(spec.eos_id);
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) continue;
    if (skip_special && impl_->special[id]) continue;
    bytes.append(impl_->token_bytes[id]);
  }
  if (impl_->spec.decode_strip_leading_space && !bytes.empty() && bytes[0] == ' ')
    bytes.erase(0, 1);
  return utf8::sanitize(bytes);
}

Tokenizer::StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(&tokenizer), skip_special_(skip_special) {}

std::string Tokenizer::StreamDecoder::next(int32_t id) {
  const Impl& impl = *tokenizer_->impl_;
  if (id < 0 || id >= tokenizer_->vocab_size()) return std::string();
  if (skip_special_ && impl.special[id]) return std::string();
  std::string_view bytes = impl.token_bytes[id];
  if (at_start_ && !bytes.empty()) {
    // Same rule as decode(): only the first byte of the whole output may be stripped.
    if (impl.spec.decode_strip_leading_space && bytes[0] == ' ') bytes.remove_prefix(1);
    at_start_ = false;
  }
  pending_.append(bytes);
  return utf8::take_complete(&pending_);
}

std::string Tokenizer::StreamDecoder::finish() {
  std::string out = utf8::sanitize(pending_);
  pending_.clear();
  at_start_ = true;
  return out;
}

int32_t Tokenizer::token_to_id(std::string_view token) const {
  return impl_->vocab_index.find(token);
}

const std::string& Tokenizer::id_to_token(int32_t id) const {
  static const std::string kEmpty;
  if (id < 0 || id >= vocab_size()) return kEmpty;
  return impl_->spec.vocab[id];
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->spec.vocab.size()); }
int32_t Tokenizer::bos_id() const { return impl_->spec.bos_id; }
const std::vector<int32_t>& Tokenizer::eos_ids() const { return impl_->eos_ids; }
bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->special[id] != 0;
}
const std::string& Tokenizer::chat_template() const { return impl_->spec.chat_template; }
const TokenizerSpec& Tokenizer::spec() const { return impl_->spec; }

}  // namespace roofline
