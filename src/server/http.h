// HTTP/1.1 requests as the server reads them: a pure, bounded parser (no I/O, no allocation beyond
// the request it fills) that takes the bytes received so far and says whether they hold a whole
// request, need more, or can never be one — with the status code to answer. Fuzzed by
// fuzz/http_request_fuzz.cc; tested in tests/server/http_test.cc.
//
// Accepted: origin-form targets ("/v1/models?x=1"), HTTP/1.0 and 1.1, CRLF line ends, bodies with
// Content-Length. Refused: bare-LF line ends and folded header lines (400), Transfer-Encoding
// (501: send Content-Length), a target over the limit (414), a header block over the limit or too
// many headers (431), a body over the limit (413), other HTTP versions (505).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace roofline {

struct HttpLimits {
  size_t max_header_bytes = 16 * 1024;  // request line + headers + the blank line
  size_t max_target_bytes = 8 * 1024;
  size_t max_headers = 100;
  size_t max_body_bytes = 1 << 20;
};

struct HttpRequest {
  std::string method;  // e.g. "POST"
  std::string target;  // e.g. "/v1/completions?x=1"
  std::string path;    // target without the query
  int minor_version = 1;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, values trimmed
  std::string body;
  bool keep_alive = true;  // HTTP/1.1 unless "Connection: close"; HTTP/1.0 only with keep-alive

  // The first header of that (lower-case) name, or nullptr.
  const std::string* header(std::string_view name) const;
};

enum class HttpParse { kIncomplete, kComplete, kError };

struct HttpParseResult {
  HttpParse state = HttpParse::kIncomplete;
  size_t consumed = 0;  // kComplete: bytes of `data` the request took (a pipelined one may follow)
  int status = 0;       // kError: the status to answer (400, 411, 413, 414, 431, 501, 505)
  std::string message;  // kError: what is wrong, for the client
};

// Parses the request at the start of `data` (everything received so far on the connection).
// kIncomplete means more bytes may complete it; kError is final (answer and close).
HttpParseResult parse_http_request(std::string_view data, const HttpLimits& limits,
                                   HttpRequest* out);

// "Bad Request" etc. for the statuses the server sends.
const char* http_reason_phrase(int status);

}  // namespace roofline
