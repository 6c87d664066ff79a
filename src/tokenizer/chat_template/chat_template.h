// Chat templates: turns a conversation into the prompt text a chat model was trained on, by
// running the model's own Jinja2 template (tokenizer_config.json `chat_template`, GGUF
// `tokenizer.chat_template`).
//
// The interpreter is an in-house Jinja2 subset (jinja_*.h in this folder) that renders the real
// templates of the supported families byte-identically to Hugging Face transformers'
// `apply_chat_template`: its environment (trim_blocks, lstrip_blocks, loop controls, the
// `generation` tag, `tojson` without HTML escaping, `raise_exception`, `strftime_now`,
// `namespace`, the immutable sandbox that refuses `list.append`) and Python's value semantics.
// Anything outside the subset fails at compile() with line:column and the construct's name, so a
// new model's template is refused loudly instead of rendering a subtly wrong prompt.
//
// Templates are untrusted input (they come with downloaded models): rendering is bounded in
// nesting depth, loop iterations and output size, and each limit reports itself by name.
#pragma once

#include <cstdint>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "roofline/status.h"

namespace roofline {

namespace jinja {
struct Template;
}

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", "tool", ...
  std::string content;  // UTF-8 text
};

// Everything a template may read besides the messages.
struct ChatTemplateVars {
  std::string bos_token;  // e.g. "<s>"; templates that emit it themselves read `bos_token`
  std::string eos_token;  // e.g. "</s>"
  // Extra variables, as transformers' apply_chat_template(**kwargs) passes them
  // (enable_thinking=false, date_string="26 Jul 2024", ...). A name in both maps is an error.
  std::map<std::string, std::string> strings;
  std::map<std::string, bool> bools;
  // The clock behind `strftime_now(fmt)`, as local broken-down time; unset reads the wall clock.
  // Tests pin it so date-stamping templates (Llama 3.2) render reproducibly.
  std::optional<std::tm> now;
};

// Bounds on one render; a template that exceeds one fails with a Status naming the limit.
struct ChatTemplateLimits {
  uint64_t max_output_bytes = 16u << 20;    // also caps every intermediate string and list
  uint64_t max_loop_iterations = 1u << 20;  // summed over all loops of one render
  uint32_t max_nesting_depth = 256;         // parse nesting and render recursion (macros)
};

class ChatTemplate {
 public:
  // Parses `source` (Jinja2 text). Errors say "line L, column C: ..." and name the unsupported
  // filter, test, statement or syntax.
  static StatusOr<ChatTemplate> compile(const std::string& source,
                                        const ChatTemplateLimits& limits = {});

  // Renders the conversation. `add_generation_prompt` appends the assistant header so the model
  // continues as the assistant. A template's raise_exception('msg') becomes an invalid-argument
  // Status carrying 'msg' (e.g. Mistral's role-alternation rule).
  StatusOr<std::string> render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                               const ChatTemplateVars& vars) const;

  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

 private:
  ChatTemplate(std::shared_ptr<const jinja::Template> tmpl, ChatTemplateLimits limits);
  std::shared_ptr<const jinja::Template> template_;
  ChatTemplateLimits limits_;
};

}  // namespace roofline
