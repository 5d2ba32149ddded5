#pragma once

#include <specctl/sim/faults.hpp>
#include <specctl/sim/log.hpp>
#include <specctl/sim/metrics.hpp>
#include <specctl/sim/options.hpp>
#include <specctl/sim/perf_model.hpp>
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
  ServingStats* stats = nullptr;
  std::string served_model;
  long kv_capacity_tokens = 0;
  long created = 0; // unix seconds the server came up
  // Set when warm-up is done: /health answers 200 from then on.
  bool ready = false;

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

  // Binds and listens on host:port (like uvicorn, with SO_REUSEADDR).
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

} // namespace specctl::sim
