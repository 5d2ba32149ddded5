#include "http_session.hpp"

#include <specctl/sim/openai.hpp>
#include <specctl/sim/spec_categories.hpp>

#include <nlohmann/json.hpp>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <fmt/format.h>

#include <sys/socket.h>

#include <cerrno>

namespace specctl::sim {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// Pending connections the kernel queues for us (a 1000-stream benchmark connects at once).
constexpr int k_listen_backlog = 4096;

std::error_code to_std(const boost::system::error_code& error) {
  return std::error_code(error.value(), std::system_category());
}

} // namespace

HttpServer::HttpServer(net::io_context& io, ServerContext& context) : m_io(io), m_acceptor(io), m_context(context) {}

std::expected<void, std::error_code> HttpServer::listen(const std::string& host, int port) {
  if (auto bound = bind(host, port); !bound) {
    return bound;
  }
  return listen();
}

std::expected<void, std::error_code> HttpServer::listen() {
  boost::system::error_code error;
  m_acceptor.listen(k_listen_backlog, error);
  if (error) {
    boost::system::error_code ignored;
    m_acceptor.close(ignored);
    return std::unexpected(to_std(error));
  }
  return {};
}

std::expected<void, std::error_code> HttpServer::bind(const std::string& host, int port, ReusePort reuse_port) {
  boost::system::error_code error;
  auto address = net::ip::make_address(host, error);
  if (error) {
    tcp::resolver resolver(m_io);
    const auto results = resolver.resolve(host, std::to_string(port), error);
    if (error || results.empty()) {
      return std::unexpected(error ? to_std(error) : std::make_error_code(std::errc::address_not_available));
    }
    address = results.begin()->endpoint().address();
  }
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  m_acceptor.open(endpoint.protocol(), error);
  if (!error) {
    m_acceptor.set_option(tcp::acceptor::reuse_address(true), error);
  }
  if (!error && reuse_port == ReusePort::yes) {
    const int one = 1;
    if (::setsockopt(m_acceptor.native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
      error = boost::system::error_code(errno, boost::system::system_category());
    }
  }
  if (!error) {
    m_acceptor.bind(endpoint, error);
  }
  if (error) {
    boost::system::error_code ignored;
    m_acceptor.close(ignored);
    return std::unexpected(to_std(error));
  }
  return {};
}

void HttpServer::start() {
  accept();
}

void HttpServer::stop() {
  boost::system::error_code ignored;
  m_acceptor.close(ignored);
}

void HttpServer::accept() {
  m_acceptor.async_accept([this](const boost::system::error_code& error, tcp::socket socket) {
    if (error == net::error::operation_aborted || !m_acceptor.is_open()) {
      return;
    }
    if (!error) {
      std::make_shared<Session>(std::move(socket), m_context)->start();
    } else {
      m_context.log->uvicorn(LogLevel::warning, fmt::format("accept failed: {}", error.message()));
    }
    accept();
  });
}

std::string models_body(const ServerContext& context) {
  const std::string_view owner = context.engine == Engine::vllm       ? "vllm"
                                 : context.engine == Engine::llamacpp ? "llamacpp"
                                                                      : "sglang";
  nlohmann::ordered_json model{{"id", context.served_model},   {"object", "model"},
                               {"created", context.created},   {"owned_by", owner},
                               {"root", context.served_model}, {"max_model_len", context.model->profile().context_len}};
  return nlohmann::ordered_json{{"object", "list"}, {"data", nlohmann::ordered_json::array({model})}}.dump();
}

std::string model_info_body(const ServerContext& context) {
  return nlohmann::ordered_json{{"model_path", context.served_model},
                                {"tokenizer_path", context.served_model},
                                {"is_generation", true},
                                {"preferred_sampling_params", nullptr},
                                {"weight_version", "default"},
                                {"has_image_understanding", false},
                                {"has_audio_understanding", false},
                                {"model_type", "kimi_k2"},
                                {"architectures", {context.model->profile().architecture}}}
      .dump();
}

std::string server_info_body(const ServerContext& context) {
  const auto& args = context.options->server;
  const auto& variant = context.model->variant();
  nlohmann::ordered_json info{
      {"model_path", args.model_path},
      {"host", args.host},
      {"port", args.port},
      {"tp_size", args.tp_size},
      {"disable_cuda_graph", args.disable_cuda_graph},
      {"cuda_graph_max_bs", variant.cuda_graph_max_bs},
      {"disable_custom_all_reduce", args.disable_custom_all_reduce},
      {"enable_flashinfer_allreduce_fusion", args.enable_flashinfer_allreduce_fusion},
      {"attention_backend", args.attention_backend.empty() ? "flashinfer" : args.attention_backend},
      {"mem_fraction_static", variant.mem_fraction_static},
      {"max_total_num_tokens", context.kv_capacity_tokens},
      {"max_running_requests", context.model->profile().max_running_requests},
      {"context_length", context.model->profile().context_len}};
  if (variant.spec) {
    info["speculative_algorithm"] = spec_algorithm_name(variant.spec->algorithm);
    info["speculative_draft_model_path"] = args.speculative_draft_model_path;
    info["speculative_num_steps"] = variant.spec->steps;
    info["speculative_eagle_topk"] = variant.spec->topk;
    info["speculative_num_draft_tokens"] = variant.spec->draft_tokens;
  } else {
    info["speculative_algorithm"] = nullptr;
  }
  // The scheduler's average since boot (warm-up and health generations included),
  // as SGLang's get_internal_state reports it (ENGINES.md).
  info["internal_states"] = nlohmann::ordered_json::array({nlohmann::ordered_json{
      {"avg_spec_accept_length", context.stats->spec_accept_length_since_boot()},
      {"last_gen_throughput", context.stats->gen_throughput},
  }});
  info["version"] = fmt::format("{} (specsim, profile {})", SPECCTL_VERSION, context.model->profile().name);
  return info.dump();
}

std::string wire_response_id(const ServerContext& context, RequestId id) {
  return context.engine == Engine::llamacpp ? "chatcmpl-" + response_id(id) : response_id(id);
}

std::string sim_requests_body(const ServerContext& context) {
  nlohmann::ordered_json requests = nlohmann::ordered_json::array();
  if (context.scheduler != nullptr) {
    for (const auto& done : context.scheduler->recent()) {
      requests.push_back(nlohmann::ordered_json{{"id", wire_response_id(context, done.id)},
                                                {"prompt_tokens", done.prompt_tokens},
                                                {"completion_tokens", done.completion_tokens},
                                                {"arrival_s", done.arrival_s},
                                                {"first_token_s", done.first_token_s},
                                                {"finish_s", done.finish_s}});
    }
  }
  return nlohmann::ordered_json{{"profile", context.model->profile().name},
                                {"speed", context.options->sim.speed},
                                {"model_time_s", context.scheduler ? context.scheduler->model_now_s() : 0.0},
                                {"requests", requests}}
      .dump();
}

namespace {

double accept_length(long tokens, long passes) {
  return passes > 0 ? static_cast<double>(tokens) / static_cast<double>(passes) : 0.0;
}

} // namespace

namespace {

nlohmann::ordered_json category_json(int category) {
  if (category < 0) {
    return nullptr;
  }
  return std::string(spec_categories()[static_cast<std::size_t>(category)].name);
}

} // namespace

std::string sim_truth_body(const ServerContext& context) {
  const ServingStats& stats = *context.stats;
  nlohmann::ordered_json per_pos = nlohmann::ordered_json::array();
  for (const long count : stats.spec_accepted_per_pos) {
    per_pos.push_back(count);
  }
  nlohmann::ordered_json requests = nlohmann::ordered_json::array();
  if (context.scheduler != nullptr) {
    for (const auto& done : context.scheduler->recent()) {
      requests.push_back(nlohmann::ordered_json{{"id", wire_response_id(context, done.id)},
                                                {"kind", request_kind_name(done.kind)},
                                                {"prompt_tokens", done.prompt_tokens},
                                                {"completion_tokens", done.completion_tokens},
                                                {"verify_passes", done.verify_passes},
                                                {"spec_tokens", done.spec_tokens},
                                                {"draft_tokens", done.verify_passes * context.draft_depth},
                                                {"accepted_tokens", done.spec_tokens - done.verify_passes},
                                                {"accept_length", accept_length(done.spec_tokens, done.verify_passes)},
                                                {"cached_tokens", done.cached_tokens},
                                                {"category", category_json(done.category)},
                                                {"first_token_s", done.first_token_s},
                                                {"arrival_s", done.arrival_s},
                                                {"finish_s", done.finish_s}});
    }
  }
  auto energy = context.power != nullptr ? context.power->truth() : nlohmann::ordered_json();
  auto power_cap = context.scheduler != nullptr ? context.scheduler->power_cap_truth() : nlohmann::ordered_json();
  return nlohmann::ordered_json{{"engine", engine_name(context.engine)},
                                {"speculative", context.model->speculative()},
                                {"draft_depth", context.draft_depth},
                                {"model_mean_accept_length", context.model->mean_accept_length()},
                                {"since_boot",
                                 {{"requests", stats.requests_total},
                                  {"generation_tokens", stats.generation_tokens_total},
                                  {"verify_passes", stats.spec_verify_passes},
                                  {"spec_tokens", stats.spec_tokens},
                                  {"draft_tokens", stats.spec_draft_tokens},
                                  {"accepted_tokens", stats.spec_accepted()},
                                  {"accepted_per_pos", per_pos},
                                  {"accept_length", stats.spec_accept_length_since_boot()}}},
                                {"energy", std::move(energy)},
                                {"power_cap", std::move(power_cap)},
                                {"requests", requests}}
      .dump();
}

} // namespace specctl::sim
