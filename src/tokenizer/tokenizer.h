// Tokenizer: text <-> token ids for the BPE tokenizers of the model families roofline serves.
//
// Two algorithms, chosen by TokenizerSpec::kind:
//  - byte-level BPE (GPT-2, Llama-3, Qwen2, SmolLM2): the text is cut by the model's regexes
//    (PCRE2, Unicode mode), each piece's bytes are spelled in the GPT-2 byte alphabet and merged
//    by merge rank;
//  - SentencePiece-style BPE (Llama-2, Mistral, Gemma): spaces become U+2581 '▁' (optionally one
//    is prepended), the text is merged by merge rank, or, for GGUF "llama" vocabularies that carry
//    scores instead of merges, by best score first (llama.cpp's SPM algorithm); characters with no
//    token fall back to <0xNN> byte tokens.
// Added tokens (special and not) are cut out of the text before either, longest match first.
//
// The tokenizer knows nothing about files: src/io/tokenizer_files.h turns tokenizer.json or GGUF
// metadata into a TokenizerSpec.
//
// Text that is not valid UTF-8 is repaired before encoding: each maximal invalid subpart becomes
// U+FFFD, exactly as Python's bytes.decode(errors="replace") does, so the ids equal those Hugging
// Face tokenizers gives for the repaired string. decode() always returns valid UTF-8.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "roofline/status.h"

namespace roofline {

enum class TokenizerKind {
  kByteLevelBpe,
  kSentencePieceBpe,
};

// How a regex split treats the text it matched (Hugging Face's SplitDelimiterBehavior).
enum class SplitBehavior {
  kIsolated,            // matches and the text between them are separate pieces
  kRemoved,             // matches are dropped
  kMergedWithPrevious,  // a match joins the piece before it
  kMergedWithNext,      // a match joins the piece after it
  kContiguous,          // adjacent matches form one piece
};

struct RegexSplit {
  std::string pattern;  // PCRE2 syntax, compiled with UTF and UCP
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool literal = false;  // pattern is a plain string, not a regex
};

// Where the SentencePiece-style prefix '▁' (byte-level: ' ') goes. Text between added tokens is
// a "segment"; each is normalised on its own, as Hugging Face does.
enum class PrefixSpace {
  kNone,
  kEverySegment,  // tokenizer.json normaliser Prepend, Metaspace "always", GGUF add_space_prefix
  kFirstSegment,  // Metaspace prepend_scheme "first": only the segment at the start of the text
};

struct AddedToken {
  int32_t id = -1;
  std::string content;       // matched verbatim in the text
  bool special = false;      // control token: skipped by decode(skip_special = true)
  bool lstrip = false;       // the match swallows whitespace on its left
  bool rstrip = false;       // ... and on its right
  bool single_word = false;  // only matches when not inside a word
};

// Everything needed to build a Tokenizer, whatever file it came from.
struct TokenizerSpec {
  TokenizerKind kind = TokenizerKind::kByteLevelBpe;
  std::string source;  // where it came from, for error messages ("models/x/tokenizer.json")

  // [vocab_size] token text by id, as the model stores it (byte-level: in the byte alphabet,
  // "Ġthe"; SentencePiece: "▁the", "<0x0A>"). An empty string is a hole (unused id).
  std::vector<std::string> vocab;
  // Merge pairs, best (rank 0) first. Empty for score-based SentencePiece vocabularies.
  std::vector<std::pair<std::string, std::string>> merges;
  // [vocab_size] or empty: SentencePiece scores, used only when merges is empty.
  std::vector<float> scores;

  // Byte-level only: applied in order, each to every piece the previous one produced.
  std::vector<RegexSplit> splits;

  // SentencePiece-style normalisation: ' ' -> '▁', then the prefix.
  bool replace_spaces = true;
  PrefixSpace prefix_space = PrefixSpace::kNone;
  bool prefix_space_if_missing = false;  // Metaspace: no prefix if the segment starts with one
  bool split_on_prefix = false;          // Metaspace split=true: every '▁' starts a new word
  bool byte_fallback = false;            // unknown characters become <0xNN> tokens
  bool fuse_unk = false;                 // consecutive unknowns become one unk token
  // Decoding: drop one leading space of the output (SentencePiece decoders' Strip / Metaspace).
  bool decode_strip_leading_space = false;

  // Byte-level and SentencePiece: a word that is itself a token is not merged (Llama-3).
  bool ignore_merges = false;

  std::vector<AddedToken> added_tokens;
  int32_t bos_id = -1;                 // -1: none
  int32_t eos_id = -1;                 // the token add_eos appends and the primary stop token
  std::vector<int32_t> extra_eos_ids;  // other stop tokens (<|eot_id|>, generation_config)
  int32_t unk_id = -1;
  bool add_bos = false;  // encode(text, add_special_tokens = true) prepends bos_id
  bool add_eos = false;  // ... and appends eos_id

  std::string chat_template;  // Jinja source; empty if the files have none
};

class Tokenizer {
 public:
  // Validates the spec (ids in range, merges over known tokens, regexes PCRE2 accepts) and
  // builds the lookup tables. Errors name spec.source.
  static StatusOr<std::unique_ptr<Tokenizer>> create(TokenizerSpec spec);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Token ids of `text` (any bytes; see the header comment for invalid UTF-8). With
  // add_special_tokens the BOS/EOS the model's template asks for are added. Added-token strings
  // in the text ("<|im_start|>") always become their ids, as in Hugging Face tokenizers.
  // Thread-safe.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;

  // Text of `ids` (valid UTF-8; ids out of range are skipped). skip_special drops control tokens.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;

  // Turns ids arriving one at a time into text, emitting only complete UTF-8 characters: a
  // character split across tokens (byte-fallback or byte-level pieces) is held back until its
  // last byte arrives. The concatenation of next() outputs and finish() equals decode(all ids).
  class StreamDecoder {
   public:
    explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = true);
    std::string next(int32_t id);  // text completed by this id (often empty or one piece)
    // Flushes what is held back; a dangling partial character becomes U+FFFD. Resets the stream.
    std::string finish();

   private:
    const Tokenizer* tokenizer_;
    bool skip_special_;
    bool at_start_ = true;
    std::string pending_;
  };

  // -1 if the token is not in the vocabulary (added tokens included).
  int32_t token_to_id(std::string_view token) const;
  // The stored token text ("Ġthe", "▁the"); empty for ids out of range.
  const std::string& id_to_token(int32_t id) const;
  int32_t vocab_size() const;
  int32_t bos_id() const;
  // Ids that end generation: eos first, then the extra stop tokens, without duplicates.
  const std::vector<int32_t>& eos_ids() const;
  bool is_special(int32_t id) const;
  const std::string& chat_template() const;
  const TokenizerSpec& spec() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace roofline
