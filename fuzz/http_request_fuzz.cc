// libFuzzer target: parse_http_request on arbitrary bytes, as a connection would feed them —
// whole, and in every prefix the input's first byte chooses. It must return a result for any
// input, never crash or read outside the data (ASan and UBSan watch), and keep its promises: a
// complete request consumed no more than it was given, its body has its Content-Length, a prefix
// of a complete request is never an error, and an error carries a 4xx/5xx status.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/http.h"

namespace {

roofline::HttpLimits small_limits() {
  roofline::HttpLimits l;
  l.max_header_bytes = 2048;
  l.max_target_bytes = 512;
  l.max_headers = 16;
  l.max_body_bytes = 4096;
  return l;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);  // exact-size copy
  const roofline::HttpLimits limits = small_limits();
  roofline::HttpRequest req;
  const roofline::HttpParseResult whole = roofline::parse_http_request(bytes, limits, &req);
  if (whole.state == roofline::HttpParse::kError && (whole.status < 400 || whole.status > 599))
    std::abort();
  if (whole.state == roofline::HttpParse::kComplete) {
    if (whole.consumed == 0 || whole.consumed > size) std::abort();
    if (req.body.size() > limits.max_body_bytes) std::abort();
    if (req.target.empty() || req.target[0] != '/') std::abort();
    // Every strict prefix of a complete request needs more bytes; none is an error.
    const size_t step = size > 0 ? 1 + data[0] % 7 : 1;
    for (size_t n = 0; n < whole.consumed; n += step) {
      roofline::HttpRequest partial;
      const auto r =
          roofline::parse_http_request(std::string_view(bytes).substr(0, n), limits, &partial);
      if (r.state != roofline::HttpParse::kIncomplete) std::abort();
    }
  }
  return 0;
}
