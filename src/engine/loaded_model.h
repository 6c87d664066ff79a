// LoadedModel: what Model and Engine both build from ModelOptions: the runner, the public
// ModelInfo and the tokenizer (from a GGUF's metadata or tokenizer.json beside the weights).
#pragma once

#include <memory>
#include <string>

#include "roofline/model.h"
#include "roofline/status.h"
#include "runtime/model_runner.h"
#include "tokenizer/chat_template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace roofline {

struct LoadedModel {
  std::unique_ptr<ModelRunner> runner;
  ModelInfo info;
  std::unique_ptr<Tokenizer> tokenizer;               // null when the model files carry none
  std::string no_tokenizer_reason;                    // why, when tokenizer is null
  std::shared_ptr<const ChatTemplate> chat_template;  // null when there is none
  Status chat_template_status;  // why there is none (absent, or fails to compile)

  // InvalidArgument naming the reason when there is no tokenizer.
  Status need_tokenizer() const;
  // The conversation rendered with the model's chat template (its BOS/EOS strings bound).
  StatusOr<std::string> render_chat(const std::vector<ChatTurn>& turns,
                                    bool add_generation_prompt) const;
};

// The runner options a ModelOptions describes (the CLI builds runners directly from them too).
RunnerOptions runner_options(const ModelOptions& options);

// Loads the model `options` names. A model without a tokenizer still loads (it runs from token
// ids); a tokenizer that exists but is broken is an error.
StatusOr<LoadedModel> load_model(const ModelOptions& options, bool enable_prefix_cache);

}  // namespace roofline
