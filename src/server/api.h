// The OpenAI API surface of `roofline serve`, without sockets: request bodies in (validated into
// engine requests, with OpenAI-style errors naming the bad field), response bodies and
// server-sent events out. Tested in tests/server/api_test.cc.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "roofline/engine.h"

namespace roofline {

// What the API layer needs to know of the loaded model.
struct ApiContext {
  const Engine* engine = nullptr;  // tokenize / render_chat
  std::string model_name;          // what clients send as "model" and /v1/models lists
  int64_t max_model_len = 0;
  int64_t vocab_size = 0;
  int64_t max_num_seqs = 0;
  int64_t max_waiting = 0;  // queued beyond max_num_seqs; n may not exceed the sum
  int64_t created = 0;      // unix time the server started
};

// model_name: served_model_name when given, else default_name.
ApiContext make_api_context(const Engine& engine, const std::string& served_model_name,
                            const std::string& default_name, int64_t max_num_seqs,
                            int64_t max_waiting);

struct ApiRequest {
  bool chat = false;
  std::vector<int32_t> prompt_ids;
  SamplingParams params;
  int64_t n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: prompt text before the completion
  std::string prompt_text;     // for echo
};

struct ApiParse {
  bool ok = false;
  std::optional<ApiRequest> request;
  int status = 400;
  std::string message;
  std::string param;
};

// Parses and validates a /v1/completions (chat = false) or /v1/chat/completions body: JSON
// syntax and UTF-8, every known field's type and range, the model name (404 when it is not ours),
// the prompt's length plus max_tokens against the context (400 with the counts).
ApiParse parse_api_request(const std::string& body, bool chat, const ApiContext& ctx);

// {"error": {"message", "type", "param", "code"}} with the message capped at 512 bytes.
nlohmann::json api_error_body(int status, const std::string& message, const std::string& param);

// Turns engine outputs into one response (or a stream of events) for an ApiRequest.
class ApiResponseBuilder {
 public:
  ApiResponseBuilder(const ApiRequest& request, const ApiContext& ctx);
  // Non-streaming: accumulate choice `index`'s output.
  void add(int64_t index, const RequestOutput& out);
  nlohmann::json response() const;
  // Set when an engine request ended in an error: answer this instead of response().
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }
  // Streaming: the first events (chat: each choice's role), then one per output ("" when it
  // carries nothing to send), then the end (finish reasons already sent; usage; [DONE]).
  std::string stream_start();
  std::string stream_event(int64_t index, const RequestOutput& out);
  std::string stream_end();

 private:
  std::string event(const nlohmann::json& chunk) const;
  nlohmann::json chunk_base() const;

  const ApiRequest req_;
  const ApiContext ctx_;
  std::string id_;
  int64_t created_;
  struct Choice {
    std::string text;
    std::string finish_reason;
    int64_t completion_tokens = 0;
    std::vector<TokenLogprob> logprobs;  // non-streamed
    int64_t text_offset = 0;             // streamed completions: where the next token starts
  };
  std::vector<Choice> choices_;
  int64_t prompt_tokens_ = 0;
  int error_status_ = 0;
  std::string error_message_;
};

}  // namespace roofline
