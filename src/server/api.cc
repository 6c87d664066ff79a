// The OpenAI API surface (see api.h).
#include "server/api.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <random>

namespace roofline {

namespace {

using json = nlohmann::json;

constexpr int64_t kMaxN = 16;
constexpr size_t kMaxStops = 16;
constexpr size_t kMaxMessageBytes = 512;

struct Bad {
  int status;
  std::string message;
  std::string param;
};

Bad bad(const std::string& param, const std::string& why) {
  return {400, "'" + param + "' " + why, param};
}

std::string number_text(const json& v) {
  std::string s = v.dump();
  return s.size() > 32 ? s.substr(0, 32) + "..." : s;
}

// Field readers: absent or null -> the default; wrong type or range -> Bad.
int64_t get_int(const json& j, const char* name, int64_t lo, int64_t hi, int64_t dflt) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return dflt;
  // JSON integers past 64 bits arrive as doubles: say they are out of range, not "not integers".
  if (it->is_number_float() && std::fabs(it->get<double>()) >= 0x1p63 &&
      std::isfinite(it->get<double>()))
    throw bad(name, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                        number_text(*it));
  if (!it->is_number_integer()) throw bad(name, "must be an integer");
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    throw bad(name, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                        number_text(*it));
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi)
    throw bad(name, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                        std::to_string(v));
  return v;
}

double get_number(const json& j, const char* name, double lo, double hi, double dflt,
                  bool lo_open = false) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_number()) throw bad(name, "must be a number");
  const double v = it->get<double>();
  if (!std::isfinite(v) || v > hi || v < lo || (lo_open && v == lo)) {
    std::string range =
        (lo_open ? "(" : "[") + number_text(json(lo)) + ", " + number_text(json(hi)) + "]";
    throw bad(name, "must be in " + range + ", got " + number_text(*it));
  }
  return v;
}

bool get_bool(const json& j, const char* name, bool dflt) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_boolean()) throw bad(name, "must be true or false");
  return it->get<bool>();
}

std::vector<int32_t> get_token_ids(const json& v, const char* name, int64_t vocab) {
  std::vector<int32_t> ids;
  for (const json& e : v) {
    if (!e.is_number_integer()) throw bad(name, "must hold token ids (integers)");
    const int64_t id =
        e.is_number_unsigned() && e.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
            ? INT64_MAX
            : e.get<int64_t>();
    if (id < 0 || id >= vocab)
      throw bad(name, "holds token id " + std::to_string(id) +
                          ", outside this model's vocabulary of " + std::to_string(vocab));
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

std::vector<int32_t> tokenize(const ApiContext& ctx, const std::string& text, bool special,
                              const char* param) {
  if (!ctx.engine->has_tokenizer())
    throw bad(param, "is text, but this model has no tokenizer: send the prompt as token ids");
  auto ids = ctx.engine->tokenize(text, special);
  if (!ids.ok()) throw Bad{400, ids.status().message(), param};
  return *ids;
}

std::string content_text(const json& content, size_t i) {
  const std::string param = "messages[" + std::to_string(i) + "].content";
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    throw Bad{400, "'" + param + "' must be a string or an array of text parts", param};
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
        !part.contains("text") || !part["text"].is_string())
      throw Bad{
          400,
          "'" + param +
              "' parts must be {\"type\": \"text\", \"text\": \"...\"} (only text is supported)",
          param};
    text += part["text"].get<std::string>();
  }
  return text;
}

void reject_unsupported(const json& j, bool chat) {
  auto present = [&](const char* name) {
    auto it = j.find(name);
    return it != j.end() && !it->is_null() && !(it->is_boolean() && !it->get<bool>()) &&
           !(it->is_number() && it->get<double>() == 0) && !(it->is_object() && it->empty()) &&
           !(it->is_array() && it->empty());
  };
  if (!chat && present("suffix")) throw Bad{400, "'suffix' is not supported", "suffix"};
  for (const char* name : {"tools", "functions", "tool_choice", "function_call"})
    if (present(name))
      throw Bad{400, std::string("'") + name + "' (tool calling) is not supported", name};
  auto rf = j.find("response_format");
  if (rf != j.end() && !rf->is_null()) {
    if (!rf->is_object() || rf->value("type", "") != "text")
      throw Bad{400, "'response_format' supports only {\"type\": \"text\"}", "response_format"};
  }
}

}  // namespace

ApiContext make_api_context(const Engine& engine, const std::string& served_model_name,
                            const std::string& default_name, int64_t max_num_seqs,
                            int64_t max_waiting) {
  ApiContext c;
  c.engine = &engine;
  c.model_name = served_model_name.empty() ? default_name : served_model_name;
  c.max_model_len = engine.info().max_model_len;
  c.vocab_size = engine.info().vocab_size;
  c.max_num_seqs = max_num_seqs;
  c.max_waiting = max_waiting;
  c.created = static_cast<int64_t>(std::time(nullptr));
  return c;
}

json api_error_body(int status, const std::string& message, const std::string& param) {
  const char* type = "invalid_request_error";
  if (status == 401)
    type = "authentication_error";
  else if (status == 404)
    type = "not_found_error";
  else if (status == 429)
    type = "rate_limit_error";
  else if (status >= 500)
    type = "server_error";
  std::string m =
      message.size() > kMaxMessageBytes ? message.substr(0, kMaxMessageBytes) + "..." : message;
  json err{{"message", m}, {"type", type}, {"code", status}};
  err["param"] = param.empty() ? json(nullptr) : json(param);
  return json{{"error", err}};
}

ApiParse parse_api_request(const std::string& body, bool chat, const ApiContext& ctx) {
  ApiParse result;
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    const std::string what = e.what();
    result.message =
        what.find("UTF-8") != std::string::npos
            ? "the body holds invalid UTF-8 (at byte " + std::to_string(e.byte) + ")"
            : "the body is not valid JSON (syntax error at byte " + std::to_string(e.byte) + ")";
    return result;
  } catch (const json::exception&) {  // e.g. a number beyond the range of a double
    result.message = "the body holds a number too large to represent";
    return result;
  }
  try {
    if (!j.is_object()) throw Bad{400, "the body must be a JSON object", ""};
    ApiRequest r;
    r.chat = chat;
    auto model = j.find("model");
    if (model != j.end() && !model->is_null()) {
      if (!model->is_string()) throw bad("model", "must be a string");
      if (model->get<std::string>() != ctx.model_name)
        throw Bad{404,
                  "the requested model does not exist; this server has '" + ctx.model_name + "'",
                  "model"};
    }
    reject_unsupported(j, chat);

    // The prompt.
    if (chat) {
      auto msgs = j.find("messages");
      if (msgs == j.end() || !msgs->is_array() || msgs->empty())
        throw bad("messages", "must be a non-empty array of {\"role\", \"content\"} objects");
      std::vector<ChatTurn> turns;
      for (size_t i = 0; i < msgs->size(); ++i) {
        const json& m = (*msgs)[i];
        const std::string param = "messages[" + std::to_string(i) + "]";
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
          throw Bad{400, "'" + param + "' must be an object with a string 'role'", param};
        std::string role = m["role"].get<std::string>();
        if (role == "developer") role = "system";
        if (role != "system" && role != "user" && role != "assistant")
          throw Bad{400, "'" + param + ".role' must be system, developer, user or assistant",
                    param + ".role"};
        turns.push_back(
            {role, content_text(m.contains("content") ? m["content"] : json(nullptr), i)});
      }
      if (!ctx.engine->has_tokenizer())
        throw bad("messages",
                  "need a tokenizer and chat template, and this model has none: use "
                  "/v1/completions with token ids");
      auto rendered = ctx.engine->render_chat(turns, /*add_generation_prompt=*/true);
      if (!rendered.ok()) throw Bad{400, rendered.status().message(), "messages"};
      r.prompt_ids = tokenize(ctx, *rendered, /*special=*/false, "messages");
    } else {
      auto prompt = j.find("prompt");
      if (prompt == j.end() || prompt->is_null()) throw bad("prompt", "is required");
      const json* p = &*prompt;
      if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array()))
        p = &(*p)[0];
      if (p->is_string()) {
        r.prompt_text = p->get<std::string>();
        r.prompt_ids = tokenize(ctx, r.prompt_text, /*special=*/true, "prompt");
      } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
        r.prompt_ids = get_token_ids(*p, "prompt", ctx.vocab_size);
        if (ctx.engine->has_tokenizer())
          r.prompt_text = ctx.engine->decode(r.prompt_ids);  // for echo
      } else if (p->is_array() && p->size() > 1) {
        throw bad("prompt",
                  "holds several prompts; send one per request (or use n for several completions)");
      } else {
        throw bad("prompt", "must be a string or an array of token ids");
      }
    }
    if (r.prompt_ids.empty())
      throw bad(chat ? "messages" : "prompt", "is empty after tokenisation");
    const int64_t prompt_tokens = static_cast<int64_t>(r.prompt_ids.size());
    if (prompt_tokens >= ctx.max_model_len)
      throw Bad{400,
                "this model's maximum context length is " + std::to_string(ctx.max_model_len) +
                    " tokens, and the prompt alone has " + std::to_string(prompt_tokens) +
                    ": shorten it",
                chat ? "messages" : "prompt"};

    // Sampling and limits.
    SamplingParams& sp = r.params;
    const int64_t room = ctx.max_model_len - prompt_tokens;
    const char* max_name =
        chat && j.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    sp.max_tokens = get_int(j, max_name, 1, INT32_MAX, chat ? room : 16);
    if (sp.max_tokens > room)
      throw Bad{400,
                "this model's maximum context length is " + std::to_string(ctx.max_model_len) +
                    " tokens; you asked for " + std::to_string(prompt_tokens + sp.max_tokens) +
                    " (" + std::to_string(prompt_tokens) + " in the prompt, " +
                    std::to_string(sp.max_tokens) + " for the completion): lower " + max_name +
                    " or shorten the prompt",
                max_name};
    sp.temperature = static_cast<float>(get_number(j, "temperature", 0, 2, 1.0));
    sp.top_p = static_cast<float>(get_number(j, "top_p", 0, 1, 1.0, /*lo_open=*/true));
    const int64_t top_k = get_int(j, "top_k", -1, INT32_MAX, 0);
    sp.top_k = static_cast<int32_t>(top_k < 0 ? 0 : top_k);
    sp.min_p = static_cast<float>(get_number(j, "min_p", 0, 1, 0));
    sp.repetition_penalty =
        static_cast<float>(get_number(j, "repetition_penalty", 0, 10, 1, /*lo_open=*/true));
    sp.presence_penalty = static_cast<float>(get_number(j, "presence_penalty", -2, 2, 0));
    sp.frequency_penalty = static_cast<float>(get_number(j, "frequency_penalty", -2, 2, 0));
    if (j.contains("seed") && !j["seed"].is_null())
      sp.seed = static_cast<uint64_t>(get_int(j, "seed", INT64_MIN, INT64_MAX, 0));
    sp.ignore_eos = get_bool(j, "ignore_eos", false);
    if (auto st = j.find("stop"); st != j.end() && !st->is_null()) {
      if (st->is_string()) {
        sp.stop.push_back(st->get<std::string>());
      } else if (st->is_array() && st->size() <= kMaxStops) {
        for (const json& e : *st) {
          if (!e.is_string()) throw bad("stop", "must be a string or an array of strings");
          sp.stop.push_back(e.get<std::string>());
        }
      } else {
        throw bad("stop", "must be a string or an array of at most " + std::to_string(kMaxStops) +
                              " strings");
      }
      for (const std::string& s : sp.stop)
        if (s.empty()) throw bad("stop", "must not hold an empty string");
      if (!sp.stop.empty() && !ctx.engine->has_tokenizer())
        throw bad("stop", "needs a tokenizer, and this model has none: use stop_token_ids");
    }
    if (auto st = j.find("stop_token_ids"); st != j.end() && !st->is_null()) {
      if (!st->is_array()) throw bad("stop_token_ids", "must be an array of token ids");
      sp.stop_token_ids = get_token_ids(*st, "stop_token_ids", ctx.vocab_size);
    }
    if (auto lb = j.find("logit_bias"); lb != j.end() && !lb->is_null()) {
      if (!lb->is_object()) throw bad("logit_bias", "must be an object of {\"token id\": bias}");
      if (lb->size() > 1024) throw bad("logit_bias", "may name at most 1024 tokens");
      for (const auto& [key, value] : lb->items()) {
        if (key.empty() || key.size() > 9 ||
            key.find_first_not_of("0123456789") != std::string::npos)
          throw bad("logit_bias",
                    "keys must be token ids written as strings, e.g. {\"50256\": -100}");
        const int64_t id = std::stoll(key);
        if (id >= ctx.vocab_size)
          throw bad("logit_bias", "names token " + key + ", outside this model's vocabulary of " +
                                      std::to_string(ctx.vocab_size));
        if (!value.is_number() || !std::isfinite(value.get<double>()) ||
            value.get<double>() < -100 || value.get<double>() > 100)
          throw bad("logit_bias", "values must be numbers in [-100, 100]");
        sp.logit_bias.emplace_back(static_cast<int32_t>(id), value.get<float>());
      }
    }
    if (chat) {
      if (get_bool(j, "logprobs", false))
        sp.logprobs = static_cast<int32_t>(get_int(j, "top_logprobs", 0, 20, 0));
      else if (get_int(j, "top_logprobs", 0, 20, 0) > 0)
        throw bad("top_logprobs", "needs 'logprobs': true");
    } else {
      sp.logprobs = static_cast<int32_t>(get_int(j, "logprobs", 0, 20, -1));
    }
    r.n = get_int(j, "n", 1, std::min<int64_t>(kMaxN, ctx.max_num_seqs + ctx.max_waiting), 1);
    const int64_t best_of = get_int(j, "best_of", 1, kMaxN, r.n);
    if (best_of != r.n) throw bad("best_of", "must equal n (best-of sampling is not supported)");
    r.stream = get_bool(j, "stream", false);
    if (auto so = j.find("stream_options"); so != j.end() && !so->is_null()) {
      if (!so->is_object()) throw bad("stream_options", "must be an object");
      r.include_usage = get_bool(*so, "include_usage", false);
    }
    if (!chat) {
      r.echo = get_bool(j, "echo", false);
      if (r.echo && r.prompt_text.empty() && !ctx.engine->has_tokenizer())
        throw bad("echo", "needs a tokenizer to turn the prompt into text");
    }
    if (Status s = validate_sampling_params(sp, ctx.vocab_size); !s.ok())
      throw Bad{400, s.message(), ""};
    result.ok = true;
    result.request = std::move(r);
    return result;
  } catch (const Bad& b) {
    result.status = b.status;
    result.message = b.message;
    result.param = b.param;
    return result;
  } catch (const json::exception&) {
    result.message = "the body has a field of an unexpected type";
    return result;
  }
}

// ---- Responses ----

namespace {

// The engine's name (finish_reason_name), except that the OpenAI API has no "error" and no empty
// reason: a request that ended either way reports "stop".
const char* finish_name(FinishReason r) {
  return r == FinishReason::kNone || r == FinishReason::kError ? "stop" : finish_reason_name(r);
}

json text_bytes(const std::string& text) {
  json b = json::array();
  for (unsigned char c : text) b.push_back(static_cast<int>(c));
  return b;
}

// OpenAI's completions form: tokens, token_logprobs, top_logprobs, text_offset (`offset` is where
// the first token's text starts and advances past the last).
json completion_logprobs(const std::vector<TokenLogprob>& lps, const ApiContext& ctx,
                         int64_t* offset) {
  json tokens = json::array(), values = json::array(), tops = json::array(),
       offsets = json::array();
  for (const TokenLogprob& t : lps) {
    const std::string text = ctx.engine->token_text(t.token);
    tokens.push_back(text);
    values.push_back(t.logprob);
    json top = json::object();
    for (const auto& [id, lp] : t.top) top[ctx.engine->token_text(id)] = lp;
    tops.push_back(top);
    offsets.push_back(*offset);
    *offset += static_cast<int64_t>(text.size());
  }
  return json{{"tokens", tokens},
              {"token_logprobs", values},
              {"top_logprobs", tops},
              {"text_offset", offsets}};
}

// OpenAI's chat form: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
json chat_logprobs(const std::vector<TokenLogprob>& lps, const ApiContext& ctx) {
  json content = json::array();
  for (const TokenLogprob& t : lps) {
    const std::string text = ctx.engine->token_text(t.token);
    json top = json::array();
    for (const auto& [id, lp] : t.top) {
      const std::string alt = ctx.engine->token_text(id);
      top.push_back({{"token", alt}, {"logprob", lp}, {"bytes", text_bytes(alt)}});
    }
    content.push_back({{"token", text},
                       {"logprob", t.logprob},
                       {"bytes", text_bytes(text)},
                       {"top_logprobs", top}});
  }
  return json{{"content", content}, {"refusal", nullptr}};
}

std::string new_id(bool chat) {
  static std::mt19937_64 rng(std::random_device{}());
  static std::mutex mu;
  uint64_t a, b;
  {
    std::lock_guard<std::mutex> lock(mu);
    a = rng();
    b = rng();
  }
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%016llx%08llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b & 0xffffffffull));
  return std::string(chat ? "chatcmpl-" : "cmpl-") + buf;
}

}  // namespace

ApiResponseBuilder::ApiResponseBuilder(const ApiRequest& request, const ApiContext& ctx)
    : req_(request),
      ctx_(ctx),
      id_(new_id(request.chat)),
      created_(static_cast<int64_t>(std::time(nullptr))),
      choices_(static_cast<size_t>(request.n)),
      prompt_tokens_(static_cast<int64_t>(request.prompt_ids.size())) {}

void ApiResponseBuilder::add(int64_t index, const RequestOutput& out) {
  Choice& c = choices_[static_cast<size_t>(index)];
  c.text += out.new_text;
  c.completion_tokens = out.completion_tokens;
  c.logprobs.insert(c.logprobs.end(), out.logprobs.begin(), out.logprobs.end());
  if (out.finished) {
    if (out.finish_reason == FinishReason::kError) {
      error_status_ = 400;
      error_message_ = out.error;
    }
    c.finish_reason = finish_name(out.finish_reason);
  }
}

json ApiResponseBuilder::response() const {
  json choices = json::array();
  int64_t completion = 0;
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    completion += c.completion_tokens;
    const bool with_logprobs = req_.params.logprobs >= 0;
    if (req_.chat) {
      choices.push_back(
          {{"index", i},
           {"message", {{"role", "assistant"}, {"content", c.text}}},
           {"logprobs", with_logprobs ? chat_logprobs(c.logprobs, ctx_) : json(nullptr)},
           {"finish_reason", c.finish_reason}});
    } else {
      int64_t offset = req_.echo ? static_cast<int64_t>(req_.prompt_text.size()) : 0;
      choices.push_back({{"index", i},
                         {"text", req_.echo ? req_.prompt_text + c.text : c.text},
                         {"logprobs", with_logprobs ? completion_logprobs(c.logprobs, ctx_, &offset)
                                                    : json(nullptr)},
                         {"finish_reason", c.finish_reason}});
    }
  }
  return json{{"id", id_},
              {"object", req_.chat ? "chat.completion" : "text_completion"},
              {"created", created_},
              {"model", ctx_.model_name},
              {"choices", choices},
              {"usage",
               {{"prompt_tokens", prompt_tokens_},
                {"completion_tokens", completion},
                {"total_tokens", prompt_tokens_ + completion}}}};
}

json ApiResponseBuilder::chunk_base() const {
  return json{{"id", id_},
              {"object", req_.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", created_},
              {"model", ctx_.model_name}};
}

std::string ApiResponseBuilder::event(const json& chunk) const {
  return "data: " + chunk.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

std::string ApiResponseBuilder::stream_start() {
  std::string out;
  for (size_t i = 0; i < choices_.size(); ++i) {
    if (req_.echo) choices_[i].text_offset = static_cast<int64_t>(req_.prompt_text.size());
    json c = chunk_base();
    if (req_.chat) {
      c["choices"] = json::array({{{"index", i},
                                   {"delta", {{"role", "assistant"}, {"content", ""}}},
                                   {"logprobs", nullptr},
                                   {"finish_reason", nullptr}}});
    } else if (req_.echo) {
      c["choices"] = json::array({{{"index", i},
                                   {"text", req_.prompt_text},
                                   {"logprobs", nullptr},
                                   {"finish_reason", nullptr}}});
    } else {
      continue;
    }
    out += event(c);
  }
  return out;
}

std::string ApiResponseBuilder::stream_event(int64_t index, const RequestOutput& out) {
  Choice& ch = choices_[static_cast<size_t>(index)];
  ch.completion_tokens = out.completion_tokens;
  if (out.finished && out.finish_reason == FinishReason::kError)
    return event(api_error_body(400, out.error, ""));
  const bool with_logprobs = req_.params.logprobs >= 0 && !out.logprobs.empty();
  if (out.new_text.empty() && !out.finished && !with_logprobs) return "";
  json c = chunk_base();
  json finish = out.finished ? json(finish_name(out.finish_reason)) : json(nullptr);
  if (req_.chat) {
    json delta = json::object();
    if (!out.new_text.empty()) delta["content"] = out.new_text;
    json lp = with_logprobs ? chat_logprobs(out.logprobs, ctx_) : json(nullptr);
    c["choices"] = json::array(
        {{{"index", index}, {"delta", delta}, {"logprobs", lp}, {"finish_reason", finish}}});
  } else {
    json lp =
        with_logprobs ? completion_logprobs(out.logprobs, ctx_, &ch.text_offset) : json(nullptr);
    c["choices"] = json::array(
        {{{"index", index}, {"text", out.new_text}, {"logprobs", lp}, {"finish_reason", finish}}});
  }
  return event(c);
}

std::string ApiResponseBuilder::stream_end() {
  std::string out;
  if (req_.include_usage) {
    int64_t completion = 0;
    for (const Choice& c : choices_) completion += c.completion_tokens;
    json c = chunk_base();
    c["choices"] = json::array();
    c["usage"] = {{"prompt_tokens", prompt_tokens_},
                  {"completion_tokens", completion},
                  {"total_tokens", prompt_tokens_ + completion}};
    out += event(c);
  }
  return out + "data: [DONE]\n\n";
}

}  // namespace roofline
