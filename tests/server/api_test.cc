// The OpenAI API layer without sockets, on a real engine (the tiny dummy model: no tokenizer, so
// prompts are token ids): what parses, what is refused with which status and param, and the
// response shapes (non-streamed, streamed events, usage).
#include "server/api.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace roofline {
namespace {

using json = nlohmann::json;

class ApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions o;
    o.model.dummy_weights = "llama-tiny";  // vocab 512, context 256
    auto e = Engine::load(o);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    engine_ = std::move(e).value().release();
  }
  static void TearDownTestSuite() { delete engine_; }
  ApiContext ctx() const { return make_api_context(*engine_, "", "dummy-llama-tiny", 8, 256); }
  static Engine* engine_;
};
Engine* ApiTest::engine_ = nullptr;

TEST_F(ApiTest, ParsesACompletionWithEveryKnownField) {
  const auto r = parse_api_request(
      R"({"model": "dummy-llama-tiny", "prompt": [1, 2, 3], "max_tokens": 5, "temperature": 0.5,
          "top_p": 0.9, "top_k": 40, "min_p": 0.1, "seed": 7, "n": 2, "stream": true,
          "stream_options": {"include_usage": true}, "presence_penalty": 0.5,
          "frequency_penalty": -0.5, "repetition_penalty": 1.1, "stop_token_ids": [4],
          "ignore_eos": true, "user": "x", "logprobs": null, "best_of": 2})",
      false, ctx());
  ASSERT_TRUE(r.ok) << r.message;
  const ApiRequest& q = *r.request;
  EXPECT_EQ(q.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(q.params.max_tokens, 5);
  EXPECT_FLOAT_EQ(q.params.temperature, 0.5f);
  EXPECT_EQ(q.params.top_k, 40);
  EXPECT_EQ(*q.params.seed, 7u);
  EXPECT_EQ(q.n, 2);
  EXPECT_TRUE(q.stream);
  EXPECT_TRUE(q.include_usage);
  EXPECT_EQ(q.params.stop_token_ids, (std::vector<int32_t>{4}));
}

TEST_F(ApiTest, RefusesBadBodiesNamingTheFieldWithoutEchoingInput) {
  struct Case {
    const char* body;
    int status;
    const char* param;
  };
  const Case cases[] = {
      {R"({"prompt": [1], "max_tokens": -1})", 400, "max_tokens"},
      {R"({"prompt": [1], "max_tokens": 1.5})", 400, "max_tokens"},
      {R"({"prompt": [1], "max_tokens": 1e30})", 400, "max_tokens"},
      {R"({"prompt": [1], "max_tokens": 99999999999999999999999})", 400, "max_tokens"},
      {R"({"prompt": [1], "max_tokens": "5"})", 400, "max_tokens"},
      {R"({"prompt": [1], "temperature": -1})", 400, "temperature"},
      {R"({"prompt": [1], "top_p": 0})", 400, "top_p"},
      {R"({"prompt": [1], "n": 0})", 400, "n"},
      {R"({"prompt": [1], "n": 1000})", 400, "n"},
      {R"({"prompt": [1], "stop": 5})", 400, "stop"},
      {R"({"prompt": [1], "stop": "x"})", 400, "stop"},  // text stop needs a tokenizer
      {R"({"prompt": [1], "logprobs": 21})", 400, "logprobs"},
      {R"({"prompt": [1], "logprobs": true})", 400, "logprobs"},
      {R"({"prompt": [1], "logit_bias": {"x": 1}})", 400, "logit_bias"},
      {R"({"prompt": [1], "logit_bias": {"600": 1}})", 400, "logit_bias"},
      {R"({"prompt": [1], "logit_bias": {"5": 101}})", 400, "logit_bias"},
      {R"({"prompt": [1], "logit_bias": [5]})", 400, "logit_bias"},
      {R"({"prompt": [1], "best_of": 3})", 400, "best_of"},
      {R"({"prompt": [1], "stream": "yes"})", 400, "stream"},
      {R"({"prompt": [512]})", 400, "prompt"},
      {R"({"prompt": [-1]})", 400, "prompt"},
      {R"({"prompt": []})", 400, "prompt"},
      {R"({"prompt": 5})", 400, "prompt"},
      {R"({"prompt": "text"})", 400, "prompt"},  // no tokenizer
      {R"({"prompt": [[1], [2]]})", 400, "prompt"},
      {R"({})", 400, "prompt"},
      {R"({"prompt": [1], "max_tokens": 300})", 400, "max_tokens"},  // context is 256
      {R"({"model": "other-MARKER", "prompt": [1]})", 404, "model"},
      {R"([1, 2])", 400, ""},
      {R"({"prompt": [1], MARKER)", 400, ""},
      {R"({"prompt": [1], "temperature": 1e400})", 400, ""},
  };
  for (const Case& c : cases) {
    const auto r = parse_api_request(c.body, false, ctx());
    EXPECT_FALSE(r.ok) << c.body;
    EXPECT_EQ(r.status, c.status) << c.body << ": " << r.message;
    EXPECT_EQ(r.param, c.param) << c.body << ": " << r.message;
    EXPECT_EQ(r.message.find("MARKER"), std::string::npos) << r.message;
    const json err = api_error_body(r.status, r.message, r.param);
    EXPECT_EQ(err["error"]["code"], r.status);
  }
  // An integer past 64 bits is out of range, not "not an integer"; 5.0 is not an integer.
  const auto huge =
      parse_api_request(R"({"prompt": [1], "seed": 1180591620717411303424})", false, ctx());
  EXPECT_NE(huge.message.find("'seed' must be in ["), std::string::npos) << huge.message;
  const auto real = parse_api_request(R"({"prompt": [1], "max_tokens": 5.0})", false, ctx());
  EXPECT_NE(real.message.find("'max_tokens' must be an integer"), std::string::npos)
      << real.message;
  const auto over = parse_api_request(R"({"prompt": [1, 2, 3], "max_tokens": 300})", false, ctx());
  EXPECT_NE(over.message.find("256"), std::string::npos) << over.message;
  EXPECT_NE(over.message.find("303"), std::string::npos) << over.message;
  const auto utf8 = parse_api_request("{\"prompt\": \"\xff\xfe\"}", false, ctx());
  EXPECT_FALSE(utf8.ok);
  EXPECT_NE(utf8.message.find("UTF-8"), std::string::npos) << utf8.message;
  const auto chat =
      parse_api_request(R"({"messages": [{"role": "user", "content": "hi"}]})", true, ctx());
  EXPECT_FALSE(chat.ok);  // no chat template on the dummy model
  EXPECT_EQ(chat.param, "messages");
}

TEST_F(ApiTest, ErrorBodiesAreCappedAndTyped) {
  const json e = api_error_body(429, std::string(2000, 'm'), "");
  EXPECT_LE(e["error"]["message"].get<std::string>().size(), 520u);
  EXPECT_EQ(e["error"]["type"], "rate_limit_error");
  EXPECT_TRUE(e["error"]["param"].is_null());
  EXPECT_EQ(api_error_body(401, "m", "")["error"]["type"], "authentication_error");
  EXPECT_EQ(api_error_body(404, "m", "model")["error"]["param"], "model");
}

TEST_F(ApiTest, BuildsResponsesAndStreamsFromEngineOutputs) {
  const auto r = parse_api_request(
      R"({"prompt": [1, 2], "n": 2, "max_tokens": 3, "stream_options": {"include_usage": true}})",
      false, ctx());
  ASSERT_TRUE(r.ok) << r.message;
  RequestOutput a;
  a.new_token_ids = {5, 6, 7};
  a.new_text = "abc";
  a.finished = true;
  a.finish_reason = FinishReason::kLength;
  a.completion_tokens = 3;
  RequestOutput b = a;
  b.new_text = "xy";
  b.finish_reason = FinishReason::kStop;
  b.completion_tokens = 2;
  ApiResponseBuilder builder(*r.request, ctx());
  builder.add(0, a);
  builder.add(1, b);
  const json resp = builder.response();
  EXPECT_EQ(resp["object"], "text_completion");
  EXPECT_EQ(resp["model"], "dummy-llama-tiny");
  EXPECT_EQ(resp["choices"][0]["text"], "abc");
  EXPECT_EQ(resp["choices"][1]["finish_reason"], "stop");
  EXPECT_EQ(resp["usage"]["prompt_tokens"], 2);
  EXPECT_EQ(resp["usage"]["completion_tokens"], 5);
  EXPECT_EQ(resp["usage"]["total_tokens"], 7);

  ApiResponseBuilder stream(*r.request, ctx());
  EXPECT_EQ(stream.stream_start(), "");
  const std::string ev = stream.stream_event(1, b);
  ASSERT_EQ(ev.rfind("data: ", 0), 0u);
  const json chunk = json::parse(ev.substr(6));
  EXPECT_EQ(chunk["choices"][0]["index"], 1);
  EXPECT_EQ(chunk["choices"][0]["text"], "xy");
  stream.stream_event(0, a);
  const std::string end = stream.stream_end();
  EXPECT_NE(end.find("\"usage\""), std::string::npos);
  EXPECT_EQ(end.substr(end.size() - 14), "data: [DONE]\n\n");
  RequestOutput quiet;  // no text, not finished: nothing to send
  EXPECT_EQ(stream.stream_event(0, quiet), "");
}

TEST_F(ApiTest, LogitBiasSteersGreedyDecoding) {
  // Greedy without a bias, then with the chosen token banned (-100) and another forced (+100).
  auto run = [&](const char* body) {
    const auto r = parse_api_request(body, false, ctx());
    EXPECT_TRUE(r.ok) << r.message;
    auto id = engine_->add_request(r.request->prompt_ids, r.request->params);
    EXPECT_TRUE(id.ok());
    std::vector<int32_t> tokens;
    while (engine_->has_unfinished())
      for (const RequestOutput& o : engine_->step())
        tokens.insert(tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    return tokens;
  };
  const auto plain = run(R"({"prompt": [1, 2, 3], "max_tokens": 1, "temperature": 0})");
  ASSERT_EQ(plain.size(), 1u);
  const std::string ban =
      "{\"prompt\": [1, 2, 3], \"max_tokens\": 1, \"temperature\": 0, \"logit_bias\": {\"" +
      std::to_string(plain[0]) + "\": -100}}";
  const auto banned = run(ban.c_str());
  ASSERT_EQ(banned.size(), 1u);
  EXPECT_NE(banned[0], plain[0]);
  const auto forced = run(
      R"({"prompt": [1, 2, 3], "max_tokens": 3, "temperature": 0.7, "seed": 3, "logit_bias": {"77": 100}})");
  EXPECT_EQ(forced, (std::vector<int32_t>{77, 77, 77}));
}

TEST_F(ApiTest, ReportsLogprobsInOpenAIsShapes) {
  RequestOutput out;
  out.new_token_ids = {5, 6};
  out.logprobs = {{5, -0.5f, {{5, -0.5f}, {9, -1.5f}}}, {6, -0.25f, {{6, -0.25f}, {2, -2.0f}}}};
  out.finished = true;
  out.finish_reason = FinishReason::kLength;
  out.completion_tokens = 2;
  const auto c =
      parse_api_request(R"({"prompt": [1], "logprobs": 2, "max_tokens": 2})", false, ctx());
  ASSERT_TRUE(c.ok) << c.message;
  EXPECT_EQ(c.request->params.logprobs, 2);
  ApiResponseBuilder cb(*c.request, ctx());
  cb.add(0, out);
  const json lp = cb.response()["choices"][0]["logprobs"];
  EXPECT_EQ(lp["token_logprobs"], json({-0.5, -0.25}));
  EXPECT_EQ(lp["tokens"].size(), 2u);
  EXPECT_EQ(lp["text_offset"].size(), 2u);
  EXPECT_EQ(lp["top_logprobs"].size(), 2u);
  const auto none = parse_api_request(R"({"prompt": [1]})", false, ctx());
  ApiResponseBuilder nb(*none.request, ctx());
  nb.add(0, out);
  EXPECT_TRUE(nb.response()["choices"][0]["logprobs"].is_null());
}

TEST_F(ApiTest, EngineReportsTheModelsLogSoftmaxForEachToken) {
  SamplingParams p;
  p.max_tokens = 3;
  p.logprobs = 4;
  auto id = engine_->add_request({1, 2, 3}, p);
  ASSERT_TRUE(id.ok());
  std::vector<TokenLogprob> got;
  std::vector<int32_t> tokens;
  while (engine_->has_unfinished()) {
    for (const RequestOutput& o : engine_->step()) {
      got.insert(got.end(), o.logprobs.begin(), o.logprobs.end());
      tokens.insert(tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    }
  }
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].token, tokens[i]);
    EXPECT_LE(got[i].logprob, 0.0f);
    ASSERT_EQ(got[i].top.size(), 4u);
    // Greedy: the chosen token is the most likely one.
    EXPECT_EQ(got[i].top[0].first, tokens[i]);
    EXPECT_FLOAT_EQ(got[i].top[0].second, got[i].logprob);
    for (size_t k = 1; k < 4; ++k) EXPECT_LE(got[i].top[k].second, got[i].top[k - 1].second);
  }
  SamplingParams too_many;
  too_many.logprobs = 21;
  EXPECT_FALSE(engine_->add_request({1}, too_many).ok());
}

}  // namespace
}  // namespace roofline
