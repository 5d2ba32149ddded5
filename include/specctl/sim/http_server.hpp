#pragma once

#include <specctl/sim/faults.hpp>
#include <specctl/sim/log.hpp>
#include <specctl/sim/metrics.hpp>
#include <specctl/sim/options.hpp>
#include <specctl/sim/perf_model.hpp>
#include <specctl/sim/power_meter.hpp>
#include <specctl/sim/scheduler.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <expected>
#include <functional>
#include <optional>
#include <string>
#include <system_error>

namespace specctl::sim {

// Everything the HTTP sessions share; lives on the one event-loop thread.
struct ServerContext {
  const Options* options = nullptr;
  const PerfModel* model = nullptr;
  const Log* log = nullptr;
  // Null with the flood profile, which has no performance model.
  Scheduler* scheduler = nullptr;
  // The GPUs' power and energy, for /sim/truth.
  PowerMeter* power = nullptr;
  ServingStats* stats = nullptr;
  std::string served_model;
  long kv_capacity_tokens = 0;
  long created = 0; // unix seconds the server came up
  // Set when warm-up is done: /health answers 200 from then on.
  bool ready = false;
  Engine engine = Engine::sglang;
  // SGLang: each /health after warm-up runs a one-token generation
  // (http_server.py; off with SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0).
  bool health_generates = true;
  // Draft tokens per verify pass, for the drafted counts (0 without speculation).
  int draft_depth = 0;
  // llama.cpp: generations still streaming, and the shutdown waiting for them.
  int active_generations = 0;
  std::function<void()> on_generation_done;

  // The faults that act on requests.
  FractionPicker http_500{0.0};
  FractionPicker garbled{0.0};
  FractionPicker cut_stream{0.0};
  std::optional<int> die_after;
  std::chrono::milliseconds first_token_delay{0};
  long generation_requests = 0;
  // Ends the process like a crashed scheduler (die-after).
  std::function<void()> die;

  RequestId next_request_id = 1;
};

// The web server: accepts on one event loop and serves SGLang's endpoints.
class HttpServer {
public:
  HttpServer(boost::asio::io_context& io, ServerContext& context);

  // Binds host:port with SO_REUSEADDR (uvicorn, cpp-httplib) and, with
  // ReusePort::yes, SO_REUSEPORT (vLLM's create_server_socket).
  enum class ReusePort { no, yes };
  std::expected<void, std::error_code> bind(const std::string& host, int port, ReusePort reuse_port = ReusePort::no);
  // Listens on the bound socket: connections are refused until then.
  std::expected<void, std::error_code> listen();
  // bind() then listen().
  std::expected<void, std::error_code> listen(const std::string& host, int port);
  void start();
  void stop();

private:
  void accept();

  boost::asio::io_context& m_io;
  boost::asio::ip::tcp::acceptor m_acceptor;
  ServerContext& m_context;
};

// Bodies of the informational endpoints (exact JSON, tested as strings).
std::string models_body(const ServerContext& context);
std::string model_info_body(const ServerContext& context);
std::string server_info_body(const ServerContext& context);
std::string sim_requests_body(const ServerContext& context);
// The id a response carries, as the engine spells it (llama.cpp prefixes "chatcmpl-"
// to completions too): the truth and /sim/requests name requests the same way.
std::string wire_response_id(const ServerContext& context, RequestId id);
// GET /sim/truth: what the simulated speculation really did, since boot and
// per finished request, and the GPUs' energy counters at this instant and the
// power-cap fault's intervals, for tests to hold a client's reading against.
std::string sim_truth_body(const ServerContext& context);

} // namespace specctl::sim
