// libFuzzer target: arbitrary bytes compiled as a chat template and rendered over a small fixed
// conversation. compile() and render() must return a Status for any input, never crash, hang or
// grow without bound: the limits below are small so every hostile loop, string doubling or
// recursion hits its limit within milliseconds (ASan and UBSan watch).
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/chat_template/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024)
    return 0;  // real templates are a few KB; bigger inputs only slow the search
  roofline::ChatTemplateLimits limits;
  limits.max_output_bytes = 64 * 1024;
  limits.max_loop_iterations = 10000;
  limits.max_nesting_depth = 64;
  auto tmpl = roofline::ChatTemplate::compile(
      std::string(reinterpret_cast<const char*>(data), size), limits);
  if (!tmpl.ok()) return 0;
  static const std::vector<roofline::ChatMessage> kMessages = {
      {"system", "Be brief."},
      {"user", "Hi <think>\n'quoted' \"x\" ü"},
      {"assistant", "<think>hm</think>Hello"},
      {"user", "Bye"}};
  roofline::ChatTemplateVars vars;
  vars.bos_token = "<s>";
  vars.eos_token = "</s>";
  vars.bools["enable_thinking"] = false;
  vars.strings["date_string"] = "26 Jul 2024";
  vars.now = std::tm{};
  for (bool add_generation_prompt : {false, true}) {
    auto out = tmpl->render(kMessages, add_generation_prompt, vars);
    if (out.ok() && out->size() > limits.max_output_bytes) __builtin_trap();
  }
  return 0;
}
