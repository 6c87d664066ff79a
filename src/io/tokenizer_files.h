// Tokenizer files -> TokenizerSpec: a Hugging Face model directory (tokenizer.json, plus
// tokenizer_config.json and generation_config.json when present) or a GGUF file's tokenizer.*
// metadata. Both are hostile input: every id is range-checked, every type checked, and anything
// roofline's tokenizer cannot reproduce exactly (a Unigram model, an NFC normaliser, an unknown
// GGUF pre-tokenizer) is an Unimplemented error naming it, never a silently different tokenizer.
//
// Typical use (roofline run):
//   ROOFLINE_ASSIGN_OR_RETURN(TokenizerSpec spec, load_tokenizer_json(model_dir));  // or from GGUF
//   ROOFLINE_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, Tokenizer::create(std::move(spec)));
#pragma once

#include <string>
#include <string_view>

#include "roofline/status.h"
#include "tokenizer/tokenizer.h"

namespace roofline {

class GgufFile;

// Reads <model_dir>/tokenizer.json (required), tokenizer_config.json (chat_template, bos/eos
// tokens) and generation_config.json (extra eos ids), each optional.
StatusOr<TokenizerSpec> load_tokenizer_json(const std::string& model_dir);

// The same from file contents; config texts may be empty (absent). `source` names the files in
// error messages. This is what the tests and the fuzz target call.
StatusOr<TokenizerSpec> parse_tokenizer_json(std::string_view tokenizer_json,
                                             std::string_view tokenizer_config_json,
                                             std::string_view generation_config_json,
                                             const std::string& source);

// From GGUF metadata: tokenizer.ggml.{model, tokens, token_type, merges, scores, bos_token_id,
// eos_token_id, eot_token_id, eom_token_id, unknown_token_id, add_bos_token, add_eos_token,
// add_space_prefix, pre} and tokenizer.chat_template.
StatusOr<TokenizerSpec> tokenizer_spec_from_gguf(const GgufFile& gguf);

// The pre-tokenizer regexes llama.cpp uses for a GGUF tokenizer.ggml.pre name ("smollm",
// "llama-bpe", "qwen2", "gpt-2", "default", ...); Unimplemented for names roofline does not know.
// *ignore_merges receives whether that pre-tokenizer skips merging whole-token words (Llama-3).
StatusOr<std::vector<RegexSplit>> gguf_pre_tokenizer_splits(const std::string& name,
                                                            bool* ignore_merges);

}  // namespace roofline
