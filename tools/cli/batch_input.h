// Batch input for `roofline generate --input` and `roofline bench throughput --input`: a JSONL file
// of requests, read and checked line by line, then resolved against the loaded model.
//
// Each input line is a JSON object: {"prompt": "text"} (fed as is), {"messages": [{"role": "user",
// "content": "..."}]} (rendered with the model's chat template) or {"prompt_ids": [1, 2]}, plus
// optional sampling fields (those of roofline::SamplingParams; the command-line flags are their
// defaults). Blank lines are skipped. Every line is checked before any request starts, in two
// passes: JSON, fields and ranges (the first bad line fails the run, by number), then, once the
// model is loaded, the prompt (tokenizer, vocabulary) and stop_token_ids against it.

#pragma once

#include <optional>
#include <string>
#include <vector>

#include "roofline/engine.h"
#include "roofline/status.h"

namespace roofline::cli {

struct BatchItem {
  int line = 0;
  std::optional<std::string> text;
  std::vector<roofline::ChatTurn> messages;  // non-empty: a chat request
  std::vector<int32_t> ids;
  roofline::SamplingParams params;
};

Status line_error(const std::string& path, int line, const std::string& what);

// Every line parsed and its fields range-checked; the first bad line fails, by number.
StatusOr<std::vector<BatchItem>> read_batch(const std::string& path,
                                            const SamplingParams& defaults);

// The second pass, once the model is loaded: chat and text prompts tokenized, ids checked against
// the vocabulary, sampling parameters and stop strings against the model.
Status resolve_batch(Engine& engine, const std::string& path, std::vector<BatchItem>* items);

}  // namespace roofline::cli
