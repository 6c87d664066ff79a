// The HTTP/1.1 request parser (see http.h).
#include "server/http.h"

#include <cctype>
#include <optional>
#include <string>

namespace roofline {

namespace {

bool is_tchar(unsigned char c) {
  if (std::isalnum(c)) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

HttpParseResult error(int status, std::string message) {
  HttpParseResult r;
  r.state = HttpParse::kError;
  r.status = status;
  r.message = std::move(message);
  return r;
}

// The longest method accepted: the standard ones have at most 7 bytes; extension methods get room.
constexpr size_t kMaxMethodBytes = 32;

std::string method_too_long() {
  return "the method exceeds " + std::to_string(kMaxMethodBytes) + " bytes";
}

std::string target_too_long(const HttpLimits& limits) {
  return "the request target exceeds " + std::to_string(limits.max_target_bytes) + " bytes";
}

// The errors a request line still arriving (`line`: everything before its CR so far) already
// has for certain: a method, target or version already longer than any complete request may
// have. Only what the complete parse rejects too, so a prefix of a valid request never errs.
std::optional<HttpParseResult> partial_request_line_error(std::string_view line,
                                                          const HttpLimits& limits) {
  const size_t sp1 = line.find(' ');
  if (line.substr(0, sp1).size() > kMaxMethodBytes) return error(400, method_too_long());
  if (sp1 == std::string_view::npos) return std::nullopt;
  const size_t sp2 = line.find(' ', sp1 + 1);
  if (line.substr(sp1 + 1, sp2 == std::string_view::npos ? sp2 : sp2 - sp1 - 1).size() >
      limits.max_target_bytes)
    return error(414, target_too_long(limits));
  if (sp2 != std::string_view::npos && line.size() - sp2 - 1 > 8)
    return error(400, "malformed HTTP version");
  return std::nullopt;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

const std::string* HttpRequest::header(std::string_view name) const {
  for (const auto& h : headers)
    if (h.first == name) return &h.second;
  return nullptr;
}

HttpParseResult parse_http_request(std::string_view data, const HttpLimits& limits,
                                   HttpRequest* out) {
  HttpParseResult incomplete;
  const size_t end = data.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    // A bare LF anywhere in what has come so far can never become a valid header block.
    for (size_t lf = data.find('\n'); lf != std::string_view::npos; lf = data.find('\n', lf + 1))
      if (lf == 0 || data[lf - 1] != '\r') return error(400, "header lines must end with CRLF");
    if (data.size() > limits.max_header_bytes)
      return error(431, "the request line and headers exceed " +
                            std::to_string(limits.max_header_bytes) + " bytes");
    // (up to the first CR: the line's CRLF may be half there)
    if (auto e = partial_request_line_error(data.substr(0, data.find('\r')), limits)) return *e;
    return incomplete;
  }
  const size_t head_bytes = end + 4;
  if (head_bytes > limits.max_header_bytes)
    return error(431, "the request line and headers exceed " +
                          std::to_string(limits.max_header_bytes) + " bytes");
  HttpRequest req;
  std::string_view head = data.substr(0, end + 2);  // every line with its CRLF

  // Request line: METHOD SP target SP HTTP/1.x
  size_t eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  head.remove_prefix(eol + 2);
  const size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0) return error(400, "malformed request line");
  const size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return error(400, "malformed request line");
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (method.size() > kMaxMethodBytes) return error(400, method_too_long());
  for (unsigned char c : method)
    if (!is_tchar(c)) return error(400, "malformed method");
  if (target.size() > limits.max_target_bytes) return error(414, target_too_long(limits));
  if (target.empty() || target.front() != '/')
    return error(400, "the request target must start with '/'");
  for (unsigned char c : target)
    if (c <= 0x20 || c >= 0x7f)
      return error(400, "the request target holds a control or non-ASCII byte");
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" ||
      !std::isdigit(static_cast<unsigned char>(version[5])) || version[6] != '.' ||
      !std::isdigit(static_cast<unsigned char>(version[7])))
    return error(400, "malformed HTTP version");
  if (version[5] != '1' || (version[7] != '0' && version[7] != '1'))
    return error(505, "only HTTP/1.0 and HTTP/1.1 are served");
  req.method = std::string(method);
  req.target = std::string(target);
  req.path = req.target.substr(0, req.target.find('?'));
  req.minor_version = version[7] - '0';

  // Header lines.
  while (!head.empty()) {
    eol = head.find("\r\n");
    line = head.substr(0, eol);
    head.remove_prefix(eol + 2);
    if (line.empty() || line.front() == ' ' || line.front() == '\t')
      return error(400, "folded or empty header line");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0)
      return error(400, "header line without a name");
    const std::string_view name = line.substr(0, colon);
    for (unsigned char c : name)
      if (!is_tchar(c)) return error(400, "malformed header name");
    const std::string_view value = trim(line.substr(colon + 1));
    for (unsigned char c : value)
      if ((c < 0x20 && c != '\t') || c == 0x7f) return error(400, "control byte in a header value");
    if (req.headers.size() >= limits.max_headers)
      return error(431, "more than " + std::to_string(limits.max_headers) + " headers");
    req.headers.emplace_back(lower(name), std::string(value));
  }

  // Body framing: Content-Length only.
  if (req.header("transfer-encoding"))
    return error(501, "Transfer-Encoding is not supported: send the body with Content-Length");
  size_t length = 0;
  bool have_length = false;
  for (const auto& h : req.headers) {
    if (h.first != "content-length") continue;
    if (h.second.empty() || h.second.size() > 18) return error(400, "malformed Content-Length");
    size_t v = 0;
    for (unsigned char c : h.second) {
      if (!std::isdigit(c)) return error(400, "malformed Content-Length");
      v = v * 10 + (c - '0');
    }
    if (have_length && v != length) return error(400, "conflicting Content-Length headers");
    length = v;
    have_length = true;
  }
  if (length > limits.max_body_bytes)
    return error(413, "the body (" + std::to_string(length) + " bytes) exceeds " +
                          std::to_string(limits.max_body_bytes) + " bytes");
  if (!have_length && (req.method == "POST" || req.method == "PUT" || req.method == "PATCH"))
    return error(411, "a request with a body needs Content-Length");
  if (data.size() - head_bytes < length) return incomplete;
  req.body = std::string(data.substr(head_bytes, length));

  const std::string* connection = req.header("connection");
  const std::string conn = connection ? lower(*connection) : std::string();
  req.keep_alive = req.minor_version == 1 ? conn.find("close") == std::string::npos
                                          : conn.find("keep-alive") != std::string::npos;
  *out = std::move(req);
  HttpParseResult done;
  done.state = HttpParse::kComplete;
  done.consumed = head_bytes + length;
  return done;
}

const char* http_reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

}  // namespace roofline
