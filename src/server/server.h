// `roofline serve`: an OpenAI-compatible HTTP server over the Engine.
//
// Threads: one accepts connections; one worker per connection (bounded) reads requests with
// deadlines (a slow sender is cut off), validates them and submits them to the engine; one engine
// thread steps the Engine whenever requests are queued or running and hands each step's outputs
// to the waiting workers; the caller's thread waits for SIGTERM / SIGINT and shuts down
// gracefully (stop accepting, let in-flight requests finish within a grace period, abort the
// rest, return).
//
// Endpoints: POST /v1/completions, POST /v1/chat/completions (streaming as server-sent events in
// OpenAI's chunk format, ending with "data: [DONE]"), GET /v1/models, GET /health (503 while the
// model loads, 200 when ready), GET /metrics (Prometheus text). Errors are OpenAI-style JSON
// bodies, size-capped, never echoing the input. A client that disconnects has its requests
// aborted; their KV blocks are freed at the engine's next step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "roofline/engine.h"
#include "roofline/status.h"
#include "server/http.h"

namespace roofline {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                 // 0: any free port (printed when listening)
  std::string api_key;             // non-empty: every endpoint but /health needs it
  std::string served_model_name;   // the "model" clients name; empty: model_name
  std::string model_name;          // the default name (the CLI derives it from the model path)
  int64_t max_num_seqs = 8;        // the engine's running-request limit (for queue depth)
  int64_t max_waiting = 256;       // requests queued beyond the running ones; more: 429
  int64_t max_connections = 1024;  // open connections; more: 503 and close
  double header_timeout_s = 10;    // to receive a whole request line + headers
  double body_timeout_s = 30;      // to receive the body after the headers
  double idle_timeout_s = 30;      // between requests on a kept-alive connection
  double shutdown_grace_s = 30;    // in-flight requests may finish within this on SIGTERM
  HttpLimits limits;
};

// InvalidArgument, naming the flag, for a port outside [0, 65535], a negative --max-waiting, a
// shutdown grace outside [0, 3600] s, or an API key with characters an HTTP header cannot carry.
Status check_server_options(const ServerOptions& options);

// Loads the engine with `load` (while /health answers 503), serves until SIGTERM or SIGINT, then
// shuts down gracefully. `on_listening(port)` runs once the socket accepts connections.
// Returns check_server_options' errors, or an error when the socket cannot be opened or the model
// cannot be loaded.
Status serve(const ServerOptions& options,
             const std::function<StatusOr<std::unique_ptr<Engine>>()>& load,
             const std::function<void(int port)>& on_listening);

}  // namespace roofline
