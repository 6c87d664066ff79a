// load_model: ModelOptions -> runner, ModelInfo and tokenizer (see loaded_model.h).
#include "engine/loaded_model.h"

#include <filesystem>

#include "core/log.h"
#include "core/thread_pool.h"
#include "io/tokenizer_files.h"

namespace roofline {

namespace {

// A tokenizer that names ids past the model's embedding rows belongs to another model: a bos
// token it adds to every text prompt must be inside the vocabulary; more tokens than that, or an
// end token outside it, gets a warning at load (text that encodes to them is refused by the step
// with the id; generation would never stop at such an end token).
Status check_tokenizer_fits(const Tokenizer& tok, const ModelConfig& c, const std::string& dir) {
  const int64_t vocab = c.vocab_size;
  const std::string where = "the tokenizer of '" + dir + "'";
  if (tok.spec().add_bos && tok.bos_id() >= vocab)
    return invalid_argument(where + " begins every prompt with token id " +
                            std::to_string(tok.bos_id()) + ", outside the model's vocabulary of " +
                            std::to_string(vocab) +
                            " (config.json vocab_size): the tokenizer belongs to another model");
  if (tok.vocab_size() > vocab)
    ROOFLINE_LOG(kWarning, where << " has " << tok.vocab_size()
                                 << " tokens, more than the model's vocabulary of " << vocab
                                 << " (config.json vocab_size): text that encodes to the others "
                                    "will be refused; the tokenizer may belong to another model");
  for (int32_t eos : tok.eos_ids())
    if (eos >= vocab)
      ROOFLINE_LOG(kWarning, where << "'s end token id " << eos
                                   << " is outside the model's vocabulary of " << vocab
                                   << ": generation cannot stop on it");
  return ok_status();
}

}  // namespace

Status LoadedModel::need_tokenizer() const {
  if (tokenizer) return ok_status();
  return invalid_argument("this model has no tokenizer (" + no_tokenizer_reason +
                          "): it takes token ids, not text: `roofline generate --prompt-ids "
                          "1,2,3`, or \"prompt_ids\" in a request");
}

RunnerOptions runner_options(const ModelOptions& o) {
  RunnerOptions ro;
  ro.model_dir = o.model_dir;
  ro.dummy_weights = o.dummy_weights;
  ro.device = o.device;
  ro.kv_block_size = o.kv_block_size;
  ro.max_step_tokens = o.max_step_tokens;
  ro.max_seqs = o.max_seqs;
  ro.max_model_len = o.max_model_len;
  ro.kv_cache_tokens = o.kv_cache_tokens;
  ro.kv_memory_bytes = o.kv_memory_bytes;
  ro.kv_memory_fraction = o.kv_memory_fraction;
  ro.fuse = o.fuse;
  ro.cuda_graphs = o.cuda_graphs;
  return ro;
}

Status check_model_options(const ModelOptions& o) {
  if (o.num_threads < 0 || o.num_threads > 1024)
    return invalid_argument("--threads must be in [0, 1024], got " + std::to_string(o.num_threads));
  return check_runner_options(runner_options(o));
}

StatusOr<LoadedModel> load_model(const ModelOptions& o, bool enable_prefix_cache) {
  ROOFLINE_RETURN_IF_ERROR(check_model_options(o));
  if (o.num_threads > 0) ThreadPool::set_default_num_threads(o.num_threads);
  RunnerOptions ro = runner_options(o);
  ro.enable_prefix_cache = enable_prefix_cache;
  auto runner = ModelRunner::create(ro);
  if (!runner.ok())
    return runner.status().with_context("loading " + (o.dummy_weights.empty()
                                                          ? "'" + o.model_dir + "'"
                                                          : "dummy '" + o.dummy_weights + "'"));
  LoadedModel m;
  m.runner = std::move(runner).value();
  const ModelConfig& c = m.runner->config();
  ModelInfo& info = m.info;
  info.architecture = c.architecture_name;
  info.vocab_size = c.vocab_size;
  info.hidden_size = c.hidden_size;
  info.num_layers = c.num_layers;
  info.num_heads = c.num_heads;
  info.num_kv_heads = c.num_kv_heads;
  info.head_dim = c.head_dim;
  info.max_model_len = m.runner->options().max_model_len;
  info.weight_bytes = m.runner->weights().total_bytes();
  info.bos_token_id = c.bos_token_id;
  info.eos_token_ids = c.eos_token_ids;

  StatusOr<TokenizerSpec> spec = not_found("");
  if (!o.dummy_weights.empty()) {
    m.no_tokenizer_reason = "dummy weights";
  } else if (m.runner->gguf()) {
    spec = tokenizer_spec_from_gguf(*m.runner->gguf());
  } else if (std::filesystem::exists(std::filesystem::path(o.model_dir) / "tokenizer.json")) {
    spec = load_tokenizer_json(o.model_dir);
  } else {
    m.no_tokenizer_reason = "no tokenizer.json in '" + o.model_dir + "'";
  }
  if (m.no_tokenizer_reason.empty()) {
    if (!spec.ok())
      return spec.status().with_context("loading the tokenizer of '" + o.model_dir + "'");
    auto tok = Tokenizer::create(std::move(spec).value());
    if (!tok.ok())
      return tok.status().with_context("building the tokenizer of '" + o.model_dir + "'");
    m.tokenizer = std::move(tok).value();
    ROOFLINE_RETURN_IF_ERROR(check_tokenizer_fits(*m.tokenizer, c, o.model_dir));
    info.eos_token_ids = m.tokenizer->eos_ids();
    info.bos_token_id = m.tokenizer->bos_id();
    // A template that does not compile does not stop the model from loading (token ids and raw
    // text still work); asking for chat then reports why.
    const std::string& source = m.tokenizer->chat_template();
    if (source.empty()) {
      m.chat_template_status = invalid_argument("the model files carry no chat template");
    } else {
      auto compiled = ChatTemplate::compile(source);
      if (compiled.ok())
        m.chat_template = std::make_shared<const ChatTemplate>(std::move(compiled).value());
      else
        m.chat_template_status = compiled.status().with_context("the model's chat template");
    }
  }
  return m;
}

StatusOr<std::string> LoadedModel::render_chat(const std::vector<ChatTurn>& turns,
                                               bool add_generation_prompt) const {
  ROOFLINE_RETURN_IF_ERROR(need_tokenizer());
  if (!chat_template) return chat_template_status;
  std::vector<ChatMessage> messages;
  for (const ChatTurn& t : turns) messages.push_back({t.role, t.content});
  ChatTemplateVars vars;
  if (tokenizer->bos_id() >= 0) vars.bos_token = tokenizer->id_to_token(tokenizer->bos_id());
  if (!tokenizer->eos_ids().empty())
    vars.eos_token = tokenizer->id_to_token(tokenizer->eos_ids().front());
  return chat_template->render(messages, add_generation_prompt, vars);
}

}  // namespace roofline
