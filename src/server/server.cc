// The OpenAI-compatible server (see server.h).
#include "server/server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "core/log.h"
#include "server/api.h"

namespace roofline {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// ---- Metrics (Prometheus text format) ----

struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // per bound, cumulative when rendered
  double sum = 0;
  uint64_t count = 0;
  explicit Histogram(std::vector<double> b) : bounds(std::move(b)), counts(bounds.size(), 0) {}
  void observe(double v) {
    for (size_t i = 0; i < bounds.size(); ++i)
      if (v <= bounds[i]) ++counts[i];
    sum += v;
    ++count;
  }
  void render(std::ostringstream& o, const char* name, const char* help) const {
    o << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
    for (size_t i = 0; i < bounds.size(); ++i)
      o << name << "_bucket{le=\"" << bounds[i] << "\"} " << counts[i] << "\n";
    o << name << "_bucket{le=\"+Inf\"} " << count << "\n";
    o << name << "_sum " << sum << "\n" << name << "_count " << count << "\n";
  }
};

struct Metrics {
  std::mutex mu;
  std::map<int, uint64_t> responses;  // by status
  uint64_t requests_submitted = 0;    // engine requests (n per HTTP request)
  uint64_t requests_aborted = 0;      // client went away
  uint64_t prompt_tokens = 0;
  uint64_t generation_tokens = 0;
  Histogram ttft{{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};
  Histogram itl{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}};
};

// ---- Engine side ----

// What the engine thread hands a worker: the outputs of its requests (several for n > 1).
struct Channel {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<RequestOutput> outputs;
};

struct State {
  ServerOptions opts;
  std::atomic<bool> ready{false};
  std::atomic<bool> stopping{false};     // no new connections or requests
  std::atomic<bool> stop_engine{false};  // the engine thread may exit once idle
  std::unique_ptr<Engine> engine;
  ApiContext api;
  std::mutex mu;  // guards everything below
  std::condition_variable cv;
  std::map<RequestId, std::shared_ptr<Channel>> channels;
  int64_t in_flight = 0;
  EngineStats stats;
  std::atomic<int64_t> connections{0};
  Metrics metrics;
  std::atomic<bool> profiling{false};  // a POST /v1/profile is waiting for its steps
};

void engine_loop(State& s) {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(s.mu);
      s.cv.wait(lock, [&] { return s.in_flight > 0 || s.stop_engine.load(); });
      if (s.in_flight == 0 && s.stop_engine.load()) return;
    }
    std::vector<RequestOutput> outs = s.engine->step();
    const EngineStats stats = s.engine->stats();
    if (outs.empty() && !s.engine->has_unfinished())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a request not yet picked up
    std::lock_guard<std::mutex> lock(s.mu);
    s.stats = stats;
    for (RequestOutput& out : outs) {
      auto it = s.channels.find(out.id);
      if (it == s.channels.end()) continue;
      std::shared_ptr<Channel> ch = it->second;
      const bool finished = out.finished;
      {
        std::lock_guard<std::mutex> cl(ch->mu);
        ch->outputs.push_back(std::move(out));
      }
      ch->cv.notify_all();
      if (finished) {
        s.channels.erase(it);
        --s.in_flight;
      }
    }
  }
}

// ---- Sockets ----

bool send_all(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Whether the peer has closed (or reset) the connection; data waiting to be read is not a close.
bool peer_gone(int fd) {
  pollfd p{fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLRDHUP)) return true;
  if (p.revents & POLLIN) {
    char c;
    const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }
  return false;
}

std::string response_head(int status, const std::string& content_type, size_t length,
                          bool keep_alive, const std::string& extra_headers) {
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + http_reason_phrase(status) + "\r\n";
  h += "Content-Type: " + content_type + "\r\n";
  h += "Content-Length: " + std::to_string(length) + "\r\n";
  h += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  h += extra_headers;
  h += "\r\n";
  return h;
}

// ---- One connection ----

class Connection {
 public:
  Connection(State& s, int fd) : s_(s), fd_(fd) {}

  void run() {
    std::string buf;
    while (!s_.stopping.load()) {
      HttpRequest req;
      // Idle (kept alive, nothing received) until the first byte; then the headers, then the body,
      // each against its own deadline.
      auto phase_start = Clock::now();
      bool got_bytes = !buf.empty();
      HttpParseResult r = parse_http_request(buf, s_.opts.limits, &req);
      while (r.state == HttpParse::kIncomplete) {
        const bool headers_done = buf.find("\r\n\r\n") != std::string::npos;
        const double limit = !got_bytes     ? s_.opts.idle_timeout_s
                             : headers_done ? s_.opts.body_timeout_s
                                            : s_.opts.header_timeout_s;
        const double left = limit - seconds_since(phase_start);
        if (left <= 0) {
          if (got_bytes) send_error(408, "the request did not arrive in time", "", false);
          return;
        }
        if (s_.stopping.load() && !got_bytes) return;
        pollfd p{fd_, POLLIN, 0};
        const int ms = static_cast<int>(std::min(left * 1000.0, 200.0)) + 1;
        const int pr = ::poll(&p, 1, ms);
        if (pr < 0 && errno != EINTR) return;
        if (pr <= 0) continue;
        char chunk[16384];
        const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // closed or reset
        if (!got_bytes) phase_start = Clock::now();
        const bool had_headers = headers_done;
        got_bytes = true;
        buf.append(chunk, static_cast<size_t>(n));
        if (!had_headers && buf.find("\r\n\r\n") != std::string::npos) phase_start = Clock::now();
        r = parse_http_request(buf, s_.opts.limits, &req);
      }
      if (r.state == HttpParse::kError) {
        send_error(r.status, r.message, "", false);
        return;
      }
      buf.erase(0, r.consumed);
      keep_alive_ = req.keep_alive && !s_.stopping.load();
      if (!handle(req)) return;
      if (!keep_alive_) return;
    }
  }

 private:
  void count(int status) {
    std::lock_guard<std::mutex> lock(s_.metrics.mu);
    ++s_.metrics.responses[status];
  }

  // The response; a HEAD request gets its head only (Content-Length still the body's).
  bool send_body(int status, const std::string& content_type, const std::string& body,
                 const std::string& extra_headers) {
    count(status);
    const std::string head =
        response_head(status, content_type, body.size(), keep_alive_, extra_headers);
    return send_all(fd_, head_only_ ? head : head + body);
  }

  bool send_json(int status, const json& body, const std::string& extra_headers = "") {
    return send_body(status, "application/json",
                     body.dump(-1, ' ', false, json::error_handler_t::replace), extra_headers);
  }

  bool send_error(int status, const std::string& message, const std::string& param,
                  bool keep_alive = true, const std::string& extra_headers = "") {
    keep_alive_ = keep_alive_ && keep_alive;
    return send_json(status, api_error_body(status, message, param), extra_headers);
  }

  // Returns false when the connection must close.
  bool handle(const HttpRequest& in) {
    // HEAD is GET without the body.
    head_only_ = in.method == "HEAD";
    HttpRequest head_as_get;
    if (head_only_) {
      head_as_get = in;
      head_as_get.method = "GET";
    }
    const HttpRequest& req = head_only_ ? head_as_get : in;
    const std::string& path = req.path;
    if (path == "/health") {
      if (req.method != "GET") return send_error(405, "use GET", "");
      return s_.ready.load() ? send_json(200, json{{"status", "ok"}})
                             : send_json(503, json{{"status", "loading"}});
    }
    if (!s_.opts.api_key.empty()) {
      const std::string* auth = req.header("authorization");
      if (!auth || *auth != "Bearer " + s_.opts.api_key)
        return send_error(
            401, "missing or wrong API key: send the header 'Authorization: Bearer <key>'", "");
    }
    if (path == "/metrics") {
      if (req.method != "GET") return send_error(405, "use GET", "");
      if (!s_.ready.load())
        return send_error(503, "the model is still loading: retry shortly", "", true,
                          "Retry-After: 1\r\n");
      return send_body(200, "text/plain; version=0.0.4", render_metrics(), "");
    }
    const bool models = path == "/v1/models" || path.rfind("/v1/models/", 0) == 0;
    const bool completions = path == "/v1/completions";
    const bool chat = path == "/v1/chat/completions";
    const bool profile = path == "/v1/profile";
    if (!models && !completions && !chat && !profile)
      return send_error(404,
                        "no such endpoint: this server has /v1/completions, /v1/chat/completions, "
                        "/v1/models, /v1/profile, /health and /metrics",
                        "");
    if (!s_.ready.load())
      return send_error(503, "the model is still loading: retry shortly", "", true,
                        "Retry-After: 1\r\n");
    if (models) {
      if (req.method != "GET") return send_error(405, "use GET", "");
      if (path == "/v1/models")
        return send_json(200, json{{"object", "list"}, {"data", json::array({model_card()})}});
      if (path.substr(11) != s_.api.model_name)
        return send_error(
            404, "the requested model does not exist; this server has '" + s_.api.model_name + "'",
            "model");
      return send_json(200, model_card());
    }
    if (req.method != "POST") return send_error(405, "use POST", "");
    if (s_.stopping.load()) return send_error(503, "the server is shutting down", "", false);
    if (profile) return run_profile(req.body);
    auto parsed = parse_api_request(req.body, chat, s_.api);
    if (!parsed.ok) return send_error(parsed.status, parsed.message, parsed.param);
    return run(*parsed.request);
  }

  // POST /v1/profile {"steps": 8, "timeout_s": 30, "trace": false, "bandwidth_gbps": 0,
  // "peak_tflops": 0}: profiles the next `steps` engine steps of live traffic
  // (Engine::start_profile) and answers with the report, its analysis as JSON and (with "trace")
  // the Chrome trace. Steps only run while requests do, so it waits for them, up to timeout_s
  // (then 504). One profile at a time (409 while one waits).
  bool run_profile(const std::string& body) {
    json j = json::object();
    if (!body.empty()) {
      j = json::parse(body, nullptr, false);
      if (j.is_discarded() || !j.is_object())
        return send_error(
            400, "the body must be a JSON object, e.g. {\"steps\": 8, \"timeout_s\": 30}", "");
    }
    int64_t steps = 8;
    double timeout_s = 30, bandwidth_gbps = 0, peak_tflops = 0;
    bool trace = false;
    for (const auto& [key, value] : j.items()) {
      if (key == "steps") {
        if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > 10000)
          return send_error(400, "'steps' must be an integer in [1, 10000]", "steps");
        steps = value.get<int64_t>();
      } else if (key == "timeout_s") {
        if (!value.is_number() || !(value.get<double>() > 0) || value.get<double>() > 600)
          return send_error(400, "'timeout_s' must be a number in (0, 600]", "timeout_s");
        timeout_s = value.get<double>();
      } else if (key == "trace") {
        if (!value.is_boolean()) return send_error(400, "'trace' must be true or false", "trace");
        trace = value.get<bool>();
      } else if (key == "bandwidth_gbps" || key == "peak_tflops") {
        if (!value.is_number() || !(value.get<double>() >= 0) ||
            !std::isfinite(value.get<double>()))
          return send_error(
              400, key + " must be a finite number >= 0 (0: the cached calibration or the H200's)",
              key);
        (key == "bandwidth_gbps" ? bandwidth_gbps : peak_tflops) = value.get<double>();
      } else {
        // Not echoed (as no request field is): the known ones are named instead.
        return send_error(400,
                          "unknown field in the profile body (known: steps, timeout_s, trace, "
                          "bandwidth_gbps, peak_tflops)",
                          "");
      }
    }
    if (s_.profiling.exchange(true))
      return send_error(
          409, "a profile is already waiting for its steps: retry when it has answered", "");
    struct Done {
      std::atomic<bool>& flag;
      ~Done() { flag.store(false); }
    } done{s_.profiling};
    if (Status st = s_.engine->start_profile(steps, bandwidth_gbps, peak_tflops); !st.ok())
      return send_error(400, st.to_string(), "");
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (true) {
      if (std::optional<ProfileResult> p = s_.engine->take_profile()) {
        json out{{"object", "profile"},
                 {"steps", steps},
                 {"backend", p->backend},
                 {"ms_per_step", p->ms_per_step},
                 {"device_ms_per_step", p->device_ms_per_step},
                 {"ceilings",
                  {{"bytes_per_s", p->bytes_per_s},
                   {"flops_per_s", p->flops_per_s},
                   {"source", p->ceilings_source}}},
                 {"report", p->report},
                 {"analysis", json::parse(p->report_json, nullptr, false)}};
        if (trace) out["trace"] = json::parse(p->trace_json, nullptr, false);
        return send_json(200, out);
      }
      if (s_.stopping.load() || std::chrono::steady_clock::now() > deadline) {
        s_.engine->cancel_profile();
        if (s_.stopping.load()) return send_error(503, "the server is shutting down", "", false);
        return send_error(504,
                          "fewer than " + std::to_string(steps) + " engine steps ran within " +
                              json(timeout_s).dump() +
                              " s: a profile records the next steps the engine runs, so send it "
                              "while requests are running",
                          "");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  json model_card() const {
    return json{{"id", s_.api.model_name},
                {"object", "model"},
                {"created", s_.api.created},
                {"owned_by", "roofline"},
                {"max_model_len", s_.api.max_model_len}};
  }

  // Submits the n engine requests of `r`, or answers 429 when the queue is full.
  bool submit(const ApiRequest& r, std::shared_ptr<Channel> ch, std::vector<RequestId>* ids) {
    std::lock_guard<std::mutex> lock(s_.mu);
    const int64_t capacity = s_.api.max_num_seqs + s_.opts.max_waiting;
    if (s_.in_flight + r.n > capacity) return false;
    for (int64_t i = 0; i < r.n; ++i) {
      SamplingParams p = r.params;
      if (p.seed) p.seed = *p.seed + static_cast<uint64_t>(i);
      auto id = s_.engine->add_request(r.prompt_ids, p);
      if (!id.ok()) {  // validated before: should not happen; fail this request cleanly
        for (RequestId done : *ids) s_.engine->abort(done);
        ids->clear();
        return false;
      }
      ids->push_back(*id);
      s_.channels[*id] = ch;
      ++s_.in_flight;
    }
    {
      std::lock_guard<std::mutex> ml(s_.metrics.mu);
      s_.metrics.requests_submitted += static_cast<uint64_t>(r.n);
      s_.metrics.prompt_tokens += static_cast<uint64_t>(r.n) * r.prompt_ids.size();
    }
    s_.cv.notify_all();
    return true;
  }

  void abort_all(const std::vector<RequestId>& ids) {
    for (RequestId id : ids) s_.engine->abort(id);
    std::lock_guard<std::mutex> ml(s_.metrics.mu);
    s_.metrics.requests_aborted += ids.size();
  }

  // Next output of any of this request's engine requests; false when the client went away (its
  // requests are then aborted).
  bool next_output(Channel& ch, const std::vector<RequestId>& ids, RequestOutput* out) {
    while (true) {
      {
        std::unique_lock<std::mutex> lock(ch.mu);
        if (ch.cv.wait_for(lock, std::chrono::milliseconds(50),
                           [&] { return !ch.outputs.empty(); })) {
          *out = std::move(ch.outputs.front());
          ch.outputs.pop_front();
          return true;
        }
      }
      if (peer_gone(fd_)) {
        abort_all(ids);
        return false;
      }
    }
  }

  void observe_output(const RequestOutput& out, std::map<RequestId, Clock::time_point>& last,
                      Clock::time_point submitted) {
    if (out.new_token_ids.empty()) return;
    std::lock_guard<std::mutex> ml(s_.metrics.mu);
    s_.metrics.generation_tokens += out.new_token_ids.size();
    auto it = last.find(out.id);
    const auto now = Clock::now();
    if (it == last.end()) {
      s_.metrics.ttft.observe(std::chrono::duration<double>(now - submitted).count());
    } else {
      s_.metrics.itl.observe(std::chrono::duration<double>(now - it->second).count() /
                             static_cast<double>(out.new_token_ids.size()));
    }
    last[out.id] = now;
  }

  bool run(const ApiRequest& r) {
    auto ch = std::make_shared<Channel>();
    std::vector<RequestId> ids;
    if (!submit(r, ch, &ids))
      return send_error(429, "too many requests are queued: retry later", "", true,
                        "Retry-After: 1\r\n");
    const auto submitted = Clock::now();
    std::map<RequestId, int64_t> index;
    for (size_t i = 0; i < ids.size(); ++i) index[ids[i]] = static_cast<int64_t>(i);
    std::map<RequestId, Clock::time_point> last;
    ApiResponseBuilder builder(r, s_.api);
    size_t finished = 0;
    if (r.stream) {
      keep_alive_ = false;  // the stream ends with the connection
      count(200);
      const std::string head =
          "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
          "Cache-Control: no-cache\r\nConnection: close\r\n\r\n";
      if (!send_all(fd_, head + builder.stream_start())) {
        abort_all(ids);
        return false;
      }
    }
    while (finished < ids.size()) {
      RequestOutput out;
      if (!next_output(*ch, ids, &out)) return false;
      observe_output(out, last, submitted);
      if (out.finished) ++finished;
      const int64_t i = index[out.id];
      if (r.stream) {
        const std::string event = builder.stream_event(i, out);
        if (!event.empty() && !send_all(fd_, event)) {
          abort_all(ids);
          return false;
        }
      } else {
        builder.add(i, out);
      }
    }
    if (r.stream) {
      send_all(fd_, builder.stream_end());
      return false;
    }
    if (builder.error_status() != 0)
      return send_error(builder.error_status(), builder.error_message(), "");
    return send_json(200, builder.response());
  }

  std::string render_metrics() {
    std::ostringstream o;
    EngineStats st;
    int64_t in_flight;
    {
      std::lock_guard<std::mutex> lock(s_.mu);
      st = s_.stats;
      in_flight = s_.in_flight;
    }
    const int64_t running = std::min<int64_t>(in_flight, s_.api.max_num_seqs);
    std::lock_guard<std::mutex> ml(s_.metrics.mu);
    o << "# HELP roofline_http_responses_total HTTP responses by status.\n"
         "# TYPE roofline_http_responses_total counter\n";
    for (const auto& [status, n] : s_.metrics.responses)
      o << "roofline_http_responses_total{status=\"" << status << "\"} " << n << "\n";
    auto counter = [&](const char* name, const char* help, double v) {
      o << "# HELP " << name << " " << help << "\n# TYPE " << name << " counter\n"
        << name << " " << v << "\n";
    };
    auto gauge = [&](const char* name, const char* help, double v) {
      o << "# HELP " << name << " " << help << "\n# TYPE " << name << " gauge\n"
        << name << " " << v << "\n";
    };
    counter("roofline_requests_total", "Engine requests submitted (n per HTTP request).",
            static_cast<double>(s_.metrics.requests_submitted));
    counter("roofline_requests_aborted_total",
            "Engine requests aborted because the client went away.",
            static_cast<double>(s_.metrics.requests_aborted));
    counter("roofline_prompt_tokens_total", "Prompt tokens submitted.",
            static_cast<double>(s_.metrics.prompt_tokens));
    counter("roofline_generation_tokens_total", "Tokens generated.",
            static_cast<double>(s_.metrics.generation_tokens));
    gauge("roofline_requests_running", "Requests holding a running slot.",
          static_cast<double>(running));
    gauge("roofline_requests_waiting", "Requests queued behind the running ones.",
          static_cast<double>(in_flight - running));
    gauge("roofline_kv_cache_blocks_total", "KV-cache blocks.",
          static_cast<double>(st.kv_total_blocks));
    gauge("roofline_kv_cache_blocks_free", "KV-cache blocks free.",
          static_cast<double>(st.kv_free_blocks));
    gauge("roofline_kv_cache_usage_ratio", "Share of KV-cache blocks in use.",
          st.kv_total_blocks > 0 ? 1.0 - static_cast<double>(st.kv_free_blocks) / st.kv_total_blocks
                                 : 0.0);
    const int64_t lookups = st.prefix_hit_blocks + st.prefix_miss_blocks;
    gauge("roofline_prefix_cache_hit_ratio", "Prompt blocks found in the prefix cache / looked up.",
          lookups > 0 ? static_cast<double>(st.prefix_hit_blocks) / lookups : 0.0);
    gauge("roofline_open_connections", "Open HTTP connections.",
          static_cast<double>(s_.connections.load()));
    s_.metrics.ttft.render(o, "roofline_time_to_first_token_seconds", "Submission to first token.");
    s_.metrics.itl.render(o, "roofline_inter_token_latency_seconds",
                          "Between tokens of one request.");
    return o.str();
  }

  State& s_;
  int fd_;
  bool keep_alive_ = true;
  bool head_only_ = false;  // the current request is a HEAD
};

// ---- Listening ----

StatusOr<int> open_listener(const std::string& host, int port, int* bound_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port_text = std::to_string(port);
  const int gai = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &res);
  if (gai != 0)
    return invalid_argument("--host '" + host + "' does not resolve: " + gai_strerror(gai));
  int fd = -1;
  std::string last_error;
  for (addrinfo* a = res; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 512) == 0) break;
    last_error = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  if (fd < 0)
    return io_error("cannot listen on " + host + ":" + port_text + " (" + last_error +
                    "): choose another --port or stop what holds it");
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *bound_port = addr.ss_family == AF_INET6
                    ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                    : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return fd;
}

void accept_loop(State& s, int listen_fd) {
  while (!s.stopping.load()) {
    pollfd p{listen_fd, POLLIN, 0};
    const int pr = ::poll(&p, 1, 200);
    if (pr <= 0) continue;
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    timeval tv{30, 0};  // a client that stops reading cannot hold a worker forever
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (s.connections.load() >= s.opts.max_connections) {
      const std::string body =
          api_error_body(503, "too many open connections: retry later", "").dump();
      send_all(
          fd,
          response_head(503, "application/json", body.size(), false, "Retry-After: 1\r\n") + body);
      ::close(fd);
      continue;
    }
    ++s.connections;
    std::thread([&s, fd] {
      Connection(s, fd).run();
      ::shutdown(fd, SHUT_RDWR);
      ::close(fd);
      --s.connections;
    }).detach();
  }
}

}  // namespace

Status check_server_options(const ServerOptions& options) {
  if (options.port < 0 || options.port > 65535)
    return invalid_argument("--port must be in [0, 65535], got " + std::to_string(options.port));
  if (options.max_waiting < 0) return invalid_argument("--max-waiting must not be negative");
  if (!(options.shutdown_grace_s >= 0 && options.shutdown_grace_s <= 3600)) {
    char got[32];
    std::snprintf(got, sizeof(got), "%g", options.shutdown_grace_s);
    return invalid_argument("--shutdown-grace must be in [0, 3600] seconds, got " +
                            std::string(got));
  }
  // A key goes in an HTTP header: visible ASCII only, or no request could ever match it.
  for (char ch : options.api_key)
    if (ch <= ' ' || ch > '~')
      return invalid_argument(
          "--api-key may hold only visible ASCII characters (no spaces or control characters)");
  return ok_status();
}

Status serve(const ServerOptions& options,
             const std::function<StatusOr<std::unique_ptr<Engine>>()>& load,
             const std::function<void(int port)>& on_listening) {
  ROOFLINE_RETURN_IF_ERROR(check_server_options(options));
  // SIGTERM and SIGINT are taken with sigtimedwait below: block them in every thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  auto state = std::make_unique<State>();
  State& s = *state;
  s.opts = options;
  int port = 0;
  ROOFLINE_ASSIGN_OR_RETURN(int listen_fd, open_listener(options.host, options.port, &port));
  std::thread acceptor(accept_loop, std::ref(s), listen_fd);
  if (on_listening) on_listening(port);

  // Load while /health answers 503.
  Status load_status = ok_status();
  std::atomic<bool> loaded{false};
  std::thread loader([&] {
    auto engine = load();
    if (engine.ok()) {
      s.engine = std::move(engine).value();
      s.api = make_api_context(*s.engine, options.served_model_name, options.model_name,
                               options.max_num_seqs, options.max_waiting);
      s.stats = s.engine->stats();  // /metrics shows the KV pool before the first step
    } else {
      load_status = engine.status();
    }
    loaded.store(true);
  });
  auto stop_acceptor = [&] {
    s.stopping.store(true);
    acceptor.join();
    ::close(listen_fd);
  };
  timespec tick{0, 200 * 1000 * 1000};
  bool signalled = false;
  while (!loaded.load()) {
    if (sigtimedwait(&signals, nullptr, &tick) > 0) signalled = true;
  }
  loader.join();
  if (!load_status.ok()) {
    stop_acceptor();
    while (s.connections.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return load_status;
  }
  std::thread engine_thread(engine_loop, std::ref(s));
  s.ready.store(true);
  ROOFLINE_LOG(kInfo, "serve: ready, model '" << s.api.model_name << "'");
  while (!signalled) {
    if (sigtimedwait(&signals, nullptr, &tick) > 0) signalled = true;
  }

  // Graceful shutdown: no new connections or requests; in-flight ones may finish within the
  // grace period; then the rest are aborted and the workers close.
  std::fprintf(stderr, "roofline serve: shutting down\n");
  stop_acceptor();
  const auto grace_start = Clock::now();
  while (seconds_since(grace_start) < options.shutdown_grace_s) {
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.in_flight == 0) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (const auto& entry : s.channels) s.engine->abort(entry.first);
  }
  const auto close_start = Clock::now();
  while (s.connections.load() > 0 && seconds_since(close_start) < 10)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  s.stop_engine.store(true);
  s.cv.notify_all();
  engine_thread.join();
  if (s.connections.load() > 0) {
    // Workers still blocked on a client; their sockets close with the process.
    (void)state.release();
  }
  return ok_status();
}

}  // namespace roofline
