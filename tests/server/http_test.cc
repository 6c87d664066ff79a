// parse_http_request: whole requests, pipelining, every prefix incomplete, and each refusal with
// its status.
#include "server/http.h"

#include <gtest/gtest.h>

#include <string>

namespace roofline {
namespace {

HttpParseResult parse(const std::string& data, HttpRequest* req, HttpLimits limits = {}) {
  return parse_http_request(data, limits, req);
}

TEST(HttpParserTest, ParsesARequestWithABodyAndPipelinedFollowers) {
  const std::string first =
      "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
      "Content-Length: 5\r\nX-Spaced:   v  \r\n\r\nhello";
  const std::string data = first + "GET /health HTTP/1.1\r\n\r\n";
  HttpRequest req;
  const auto r = parse(data, &req);
  ASSERT_EQ(r.state, HttpParse::kComplete) << r.message;
  EXPECT_EQ(r.consumed, first.size());
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.target, "/v1/completions?x=1");
  EXPECT_EQ(req.path, "/v1/completions");
  EXPECT_EQ(req.body, "hello");
  ASSERT_NE(req.header("x-spaced"), nullptr);
  EXPECT_EQ(*req.header("x-spaced"), "v");
  EXPECT_TRUE(req.keep_alive);
  HttpRequest next;
  const auto r2 = parse(data.substr(r.consumed), &next);
  ASSERT_EQ(r2.state, HttpParse::kComplete);
  EXPECT_EQ(next.path, "/health");
  // Every strict prefix of the first request needs more bytes.
  for (size_t n = 0; n < first.size(); ++n) {
    HttpRequest p;
    EXPECT_EQ(parse(first.substr(0, n), &p).state, HttpParse::kIncomplete) << n;
  }
}

TEST(HttpParserTest, KeepAliveFollowsTheVersionAndConnectionHeader) {
  HttpRequest req;
  ASSERT_EQ(parse("GET / HTTP/1.1\r\nConnection: close\r\n\r\n", &req).state, HttpParse::kComplete);
  EXPECT_FALSE(req.keep_alive);
  ASSERT_EQ(parse("GET / HTTP/1.0\r\n\r\n", &req).state, HttpParse::kComplete);
  EXPECT_FALSE(req.keep_alive);
  ASSERT_EQ(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", &req).state,
            HttpParse::kComplete);
  EXPECT_TRUE(req.keep_alive);
}

TEST(HttpParserTest, RefusesWhatItCannotServeWithTheRightStatus) {
  HttpLimits small;
  small.max_header_bytes = 256;
  small.max_target_bytes = 64;
  small.max_headers = 3;
  small.max_body_bytes = 10;
  struct Case {
    std::string data;
    int status;
  };
  const Case cases[] = {
      {"GET /\nHost: a\r\n\r\n", 400},                // bare LF
      {"GET / HTTP/1.1\r\nHost: x\n\n", 400},         // bare LF later
      {"GET / HTTP/1.1\r\n folded: x\r\n\r\n", 400},  // folded header
      {"GET / HTTP/1.1\r\nNo colon\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nX: a\x01"
       "b\r\n\r\n",
       400},                             // control byte
      {"GET  / HTTP/1.1\r\n\r\n", 400},  // double space
      {"GET relative HTTP/1.1\r\n\r\n", 400},
      {"G(T / HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTQ/1.1\r\n\r\n", 400},
      {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET /" + std::string(100, 'a') + " HTTP/1.1\r\n\r\n", 414},
      {std::string(33, 'M') + " / HTTP/1.1\r\n\r\n", 400},  // a method over 32 bytes
      {"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", 431},
      {"GET / HTTP/1.1\r\nX: " + std::string(300, 'v') + "\r\n\r\n", 431},
      {"POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", 413},
      {"POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\n\r\n", 411},
  };
  for (const Case& c : cases) {
    HttpRequest req;
    const auto r = parse(c.data, &req, small);
    EXPECT_EQ(r.state, HttpParse::kError) << c.data;
    EXPECT_EQ(r.status, c.status) << c.data << ": " << r.message;
    EXPECT_FALSE(r.message.empty());
  }
  // Still arriving, but already too long to ever fit.
  HttpRequest req;
  EXPECT_EQ(parse(std::string(300, 'G'), &req, small).status, 431);
  EXPECT_EQ(parse(std::string(33, 'G'), &req, small).status, 400);  // the method
  EXPECT_EQ(parse("GET /" + std::string(64, 'a'), &req, small).status, 414);
  EXPECT_EQ(parse("GET / HTTP/1.1x", &req, small).status, 400);
}

TEST(HttpParserTest, EveryPrefixOfAValidRequestIsIncomplete) {
  // The longest method and target the limits allow (found by the fuzzer: a long method once made
  // a prefix fail as "target too long" while the whole request parsed).
  HttpLimits small;
  small.max_header_bytes = 256;
  small.max_target_bytes = 64;
  const std::string request =
      std::string(32, 'M') + " /" + std::string(63, 't') + " HTTP/1.1\r\nHost: x\r\n\r\n";
  HttpRequest req;
  const auto whole = parse(request, &req, small);
  ASSERT_EQ(whole.state, HttpParse::kComplete) << whole.message;
  EXPECT_EQ(req.method, std::string(32, 'M'));
  for (size_t n = 0; n < request.size(); ++n) {
    HttpRequest partial;
    const auto r = parse(request.substr(0, n), &partial, small);
    EXPECT_EQ(r.state, HttpParse::kIncomplete) << n << " bytes: " << r.message;
  }
}

}  // namespace
}  // namespace roofline
