#include "http_session.hpp"

#include <specctl/sim/tokenize.hpp>

#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include <fmt/format.h>

#include <array>
#include <ctime>

namespace specctl::sim {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// A keep-alive connection with no request for this long is closed.
constexpr std::chrono::seconds k_idle_timeout{60};
// A client that takes no bytes for this long is dropped.
constexpr std::chrono::seconds k_write_timeout{120};
constexpr std::uint64_t k_body_limit = 16 * 1024 * 1024;
// The flood profile formats this much per write: few syscalls, bounded memory.
constexpr std::size_t k_flood_batch_bytes = 128 * 1024;

std::string http_date() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[64];
  std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &utc);
  return text;
}

std::string_view path_of(std::string_view target) {
  return target.substr(0, target.find('?'));
}

} // namespace

Session::Session(tcp::socket socket, ServerContext& context) : m_stream(std::move(socket)), m_context(context) {
  boost::system::error_code ignored;
  m_stream.socket().set_option(tcp::no_delay(true), ignored);
  const auto peer = m_stream.socket().remote_endpoint(ignored);
  m_peer = fmt::format("{}:{}", peer.address().to_string(), peer.port());
}

Session::~Session() {
  generation_ended();
}

void Session::generation_ended() {
  if (!m_generation || !m_generation->counted) {
    return;
  }
  m_generation->counted = false;
  m_context.active_generations -= 1;
  if (m_context.active_generations == 0 && m_context.on_generation_done) {
    m_context.on_generation_done();
  }
}

void Session::start() {
  read_request();
}

void Session::read_request() {
  m_parser.emplace();
  m_parser->body_limit(k_body_limit);
  m_stream.expires_after(k_idle_timeout);
  http::async_read(
      m_stream, m_buffer, *m_parser,
      [self = shared_from_this()](const boost::system::error_code& error, std::size_t) { self->on_read(error); });
}

void Session::on_read(const boost::system::error_code& error) {
  if (error) {
    close();
    return;
  }
  m_stream.expires_never();
  const auto& request = m_parser->get();
  m_keep_alive = request.keep_alive();
  m_version = request.version();
  m_method = std::string(request.method_string());
  m_target = std::string(request.target());
  dispatch();
}

void Session::dispatch() {
  const auto path = path_of(m_target);
  const auto method = m_parser->get().method();
  const auto get_only = [&](auto&& answer) {
    if (method != http::verb::get) {
      send_simple(405, R"({"detail":"Method Not Allowed"})", "application/json");
    } else {
      answer();
    }
  };
  const auto post_only = [&](Endpoint endpoint) {
    if (method != http::verb::post) {
      send_simple(405, R"({"detail":"Method Not Allowed"})", "application/json");
    } else {
      handle_generation(endpoint);
    }
  };
  const Engine engine = m_context.engine;
  if (engine == Engine::llamacpp && !m_context.ready) {
    // server-http.cpp's middleware_server_state: every endpoint answers 503 while loading.
    send_simple(503, R"({"error":{"message":"Loading model","type":"unavailable_error","code":503}})",
                "application/json; charset=utf-8");
    return;
  }
  if (path == "/health") {
    get_only([&] { handle_health(); });
  } else if (path == "/health_generate" && engine == Engine::sglang) {
    get_only([&] { handle_health_generate(); });
  } else if (path == "/v1/models") {
    get_only([&] { send_simple(200, models_body(m_context), "application/json"); });
  } else if (path == "/get_model_info" && engine == Engine::sglang) {
    get_only([&] { send_simple(200, model_info_body(m_context), "application/json"); });
  } else if ((path == "/get_server_info" || path == "/server_info") && engine == Engine::sglang) {
    get_only([&] { send_simple(200, server_info_body(m_context), "application/json"); });
  } else if (path == "/metrics" && engine == Engine::sglang && m_context.options->server.enable_metrics) {
    get_only([&] {
      send_simple(200, render_metrics(*m_context.stats, m_context.served_model, m_context.model->speculative()),
                  "text/plain; version=0.0.4; charset=utf-8");
    });
  } else if (path == "/metrics" && engine == Engine::vllm) {
    // vLLM mounts prometheus_client's ASGI app at /metrics, always.
    get_only([&] {
      send_simple(200,
                  render_vllm_metrics(*m_context.stats, m_context.served_model, m_context.model->speculative(),
                                      static_cast<double>(m_context.created)),
                  "text/plain; version=0.0.4; charset=utf-8");
    });
  } else if (path == "/metrics" && engine == Engine::llamacpp) {
    // server-context.cpp's get_metrics without --metrics; llama.cpp's own metrics are not simulated.
    get_only([&] {
      send_llama_error(501, "not_supported_error",
                       m_context.options->llama.metrics
                           ? "specsim does not simulate llama.cpp's /metrics"
                           : "This server does not support metrics endpoint. Start it with `--metrics`");
    });
  } else if (path == "/sim/requests") {
    get_only([&] { send_simple(200, sim_requests_body(m_context), "application/json"); });
  } else if (path == "/sim/truth") {
    get_only([&] { send_simple(200, sim_truth_body(m_context), "application/json"); });
  } else if (path == "/tokenize" || (path == "/v1/tokenize" && engine == Engine::sglang)) {
    // vLLM's and llama.cpp's /tokenize; SGLang serves /v1/tokenize and /tokenize (http_server.py).
    if (method != http::verb::post) {
      send_simple(405, R"({"detail":"Method Not Allowed"})", "application/json");
    } else {
      handle_tokenize();
    }
  } else if (path == "/v1/completions") {
    post_only(Endpoint::completions);
  } else if (path == "/v1/chat/completions") {
    post_only(Endpoint::chat);
  } else {
    send_simple(404, R"({"detail":"Not Found"})", "application/json");
  }
}

void Session::handle_health() {
  switch (m_context.engine) {
  case Engine::vllm:
    // vLLM's /health: 200 with an empty body once it listens (api_server.py).
    send_simple(200, "", "application/json");
    return;
  case Engine::llamacpp:
    // server-context.cpp's get_health once the model is loaded.
    send_simple(200, R"({"status":"ok"})", "application/json; charset=utf-8");
    return;
  case Engine::sglang:
    break;
  }
  // SGLang: /health and /health_generate share one handler (http_server.py):
  // 503 before warm-up, then a one-token generation unless
  // SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0.
  if (!m_context.ready) {
    send_simple(503, "", "text/plain; charset=utf-8");
  } else if (m_context.health_generates) {
    handle_health_generate();
  } else {
    send_simple(200, "", "text/plain; charset=utf-8");
  }
}

void Session::send_llama_error(unsigned status, std::string_view type, std::string_view message) {
  // format_error_response (tools/server/server-common.cpp): code, message, type.
  std::string body = fmt::format("{{\"error\":{{\"code\":{},\"message\":", status);
  append_json_string(body, message);
  body += ",\"type\":";
  append_json_string(body, type);
  body += "}}";
  send_simple(status, std::move(body), "application/json; charset=utf-8");
}

void Session::handle_tokenize() {
  auto answer = tokenize_answer(m_context.engine, m_parser->get().body(), m_context.model->profile().context_len);
  send_simple(answer.status, std::move(answer.body), answer.content_type);
}

std::optional<int> Session::reported_cached(const Generation& g) const {
  // SGLang: UsageProcessor attaches prompt_tokens_details only with
  // --enable-cache-report and a count above 0; vLLM: serving_completion/chat
  // only with --enable-prompt-tokens-details and cached tokens.
  const bool report = (m_context.engine == Engine::sglang && m_context.options->server.enable_cache_report) ||
                      (m_context.engine == Engine::vllm && m_context.options->vllm.enable_prompt_tokens_details);
  return report && g.cached_tokens > 0 ? std::optional(g.cached_tokens) : std::nullopt;
}

LlamaTimings Session::llama_timings(const Generation& g) const {
  using Ms = std::chrono::duration<double, std::milli>;
  LlamaTimings t;
  // prompt_n counts the tokens evaluated, cache_n those the slot had (server_slot_stats).
  t.cache_n = g.cached_tokens;
  t.prompt_n = g.request.prompt_tokens - g.cached_tokens;
  t.predicted_n = g.known;
  if (g.first_at != std::chrono::steady_clock::time_point{}) {
    t.prompt_ms = Ms(g.first_at - g.submitted).count();
    // server_slot_stats::t_gen_us clamps to 1 us.
    t.predicted_ms = std::max(0.001, Ms(g.last_at - g.first_at).count());
  }
  t.draft_n = g.verify_passes * m_context.draft_depth;
  t.draft_n_accepted = g.spec_tokens - g.verify_passes;
  return t;
}

void Session::access_log(unsigned status) {
  if (m_context.engine == Engine::llamacpp) {
    // llama-server logs requests only at debug verbosity.
    return;
  }
  const auto reason = http::obsolete_reason(static_cast<http::status>(status));
  m_context.log->uvicorn(LogLevel::info,
                         fmt::format("{} - \"{} {} HTTP/{}.{}\" {} {}", m_peer, m_method, m_target, m_version / 10,
                                     m_version % 10, status, std::string_view(reason.data(), reason.size())),
                         UvicornStream::out);
}

void Session::send_simple(unsigned status, std::string body, std::string_view content_type) {
  auto response = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(status), m_version);
  if (m_context.engine == Engine::llamacpp) {
    // cpp-httplib: Keep-Alive on every kept-alive response.
    response->set(http::field::server, "llama.cpp");
    if (m_keep_alive) {
      response->set(http::field::keep_alive, "timeout=5, max=100");
    }
  } else {
    response->set(http::field::date, http_date());
    response->set(http::field::server, "uvicorn");
  }
  response->set(http::field::content_type, content_type);
  response->keep_alive(m_keep_alive);
  response->body() = std::move(body);
  response->prepare_payload();
  access_log(status);
  m_stream.expires_after(k_write_timeout);
  http::async_write(m_stream, *response,
                    [self = shared_from_this(), response](const boost::system::error_code& error, std::size_t) {
                      self->after_response(error);
                    });
}

void Session::after_response(const boost::system::error_code& error) {
  generation_ended();
  m_generation.reset();
  if (error || !m_keep_alive) {
    close();
    return;
  }
  read_request();
}

void Session::close() {
  boost::system::error_code ignored;
  m_stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  m_stream.close();
}

void Session::handle_health_generate() {
  if (!m_context.ready) {
    send_simple(503, "", "text/plain; charset=utf-8");
    return;
  }
  if (m_context.scheduler == nullptr) {
    send_simple(200, "", "text/plain; charset=utf-8");
    return;
  }
  const RequestId id = m_context.next_request_id++;
  m_generation.emplace(Generation{.kind = Kind::health,
                                  .id = id,
                                  .request = GenerationRequest{},
                                  .format = ChunkFormatter(Endpoint::completions, "", 0, "", 0)});
  // SGLang's /health_generate runs a one-token generation through the scheduler.
  m_context.scheduler->submit(id, 4, 1, std::chrono::milliseconds::zero(), shared_from_this(), RequestKind::health);
}

void Session::handle_generation(Endpoint endpoint) {
  auto parsed = parse_generation_request(endpoint, m_parser->get().body(), m_context.served_model,
                                         m_context.model->profile().context_len);
  if (!parsed) {
    if (m_context.engine == Engine::llamacpp) {
      send_llama_error(400, "invalid_request_error", parsed.error());
    } else {
      send_simple(400, error_body(400, "BadRequestError", parsed.error()), "application/json");
    }
    return;
  }
  m_context.generation_requests += 1;
  if (m_context.http_500.next()) {
    send_simple(
        500, error_body(500, "InternalServerError", "Internal server error (staged by specsim --sim-fault http-500)"),
        "application/json");
    return;
  }
  const RequestId id = m_context.next_request_id++;
  const long created = static_cast<long>(std::time(nullptr));
  const std::string response = wire_response_id(m_context, id);
  const bool stream = parsed->stream;
  ChunkFormatter format(endpoint, response, created, parsed->model, id);
  Generation generation{.kind = stream ? Kind::stream : Kind::whole,
                        .id = id,
                        .request = std::move(*parsed),
                        .format = std::move(format)};
  generation.flood = m_context.scheduler == nullptr;
  if (m_context.engine == Engine::llamacpp) {
    generation.llama.emplace(endpoint, response, created,
                             parsed->model.empty() ? m_context.served_model : parsed->model, id);
  }
  generation.submitted = std::chrono::steady_clock::now();
  generation.counted = true;
  m_context.active_generations += 1;
  generation.dying = m_context.die_after && m_context.generation_requests > *m_context.die_after;
  if (stream && m_context.cut_stream.next()) {
    generation.cut = true;
    generation.cut_after = generation.request.target_tokens / 2;
  }
  m_generation.emplace(std::move(generation));
  auto& g = *m_generation;
  if (g.flood) {
    // No scheduler: account for the request here and produce every token now.
    m_context.stats->requests_total += 1;
    m_context.stats->prompt_tokens_total += g.request.prompt_tokens;
    m_context.stats->generation_tokens_total += g.request.target_tokens;
    g.known = g.request.target_tokens;
    if (g.kind == Kind::whole) {
      if (g.dying) {
        m_context.die();
      }
      const std::string body =
          g.llama ? g.llama->full_response(g.request.prompt_tokens, g.request.target_tokens, g.request.finish_reason,
                                           llama_timings(g))
                  : g.format.full_response(g.request.prompt_tokens, g.request.target_tokens, g.request.finish_reason);
      generation_ended();
      send_simple(200, body, g.llama ? "application/json; charset=utf-8" : "application/json");
      return;
    }
  } else {
    m_context.scheduler->submit(id, g.request.prompt_tokens, g.request.target_tokens, m_context.first_token_delay,
                                shared_from_this(), RequestKind::user,
                                PromptShape{.keys = g.request.token_keys, .category = g.request.category});
  }
  if (g.kind == Kind::stream) {
    access_log(200);
    // Headers (and the chat role chunk) go out at once, before any token.
    pump();
  }
}

void Session::on_tokens(int tokens, bool finished) {
  on_emission(Emission{.tokens = tokens, .finished = finished});
}

void Session::on_emission(const Emission& emission) {
  if (!m_generation) {
    return;
  }
  const int tokens = emission.tokens;
  const bool finished = emission.finished;
  auto& g = *m_generation;
  const auto now = std::chrono::steady_clock::now();
  if (g.known == 0) {
    g.first_at = now;
  }
  if (emission.first) {
    g.cached_tokens = emission.cached_tokens;
  }
  g.last_at = now;
  g.known += tokens;
  g.verify_passes += emission.verify_passes;
  if (emission.verify_passes > 0) {
    g.spec_tokens += tokens;
  }
  if (g.kind == Kind::health) {
    if (finished) {
      send_simple(200, "", "text/plain; charset=utf-8");
    }
    return;
  }
  if (g.kind == Kind::whole) {
    if (g.dying && g.known * 2 >= g.request.target_tokens) {
      m_context.die();
    }
    if (finished) {
      const int known = static_cast<int>(g.known);
      const std::string body =
          g.llama ? g.llama->full_response(g.request.prompt_tokens, known, g.request.finish_reason, llama_timings(g))
                  : g.format.full_response(g.request.prompt_tokens, known, g.request.finish_reason, reported_cached(g));
      const bool llama = g.llama.has_value();
      generation_ended();
      send_simple(200, body, llama ? "application/json; charset=utf-8" : "application/json");
    }
    return;
  }
  g.pending.push_back(tokens);
  pump();
}

void Session::format_events(Generation& g, bool& cut_now) {
  const long target = g.request.target_tokens;
  const auto emit = [&](int count) {
    if (g.cut && g.emitted >= g.cut_after) {
      cut_now = true;
      return;
    }
    const bool last = g.emitted + count >= target;
    const auto finish = last ? std::optional(g.request.finish_reason) : std::nullopt;
    if (g.llama) {
      // llama.cpp sends every token as its own event, speculation or not.
      g.llama->append_tokens(m_payload, g.emitted, count);
    } else if (m_context.garbled.next()) {
      std::string event;
      g.format.append_tokens(event, g.emitted, count, finish);
      // Half an event: the JSON breaks off mid-object, the framing stays intact.
      m_payload.append(event, 0, event.size() / 2);
      m_payload += "\n\n";
    } else {
      g.format.append_tokens(m_payload, g.emitted, count, finish);
    }
    g.emitted += count;
  };
  if (g.flood) {
    while (!cut_now && g.emitted < target && m_payload.size() < k_flood_batch_bytes) {
      emit(1);
    }
    return;
  }
  for (int count : g.pending) {
    if (cut_now) {
      break;
    }
    emit(count);
  }
  g.pending.clear();
}

void Session::pump() {
  if (m_writing || !m_generation || m_generation->kind != Kind::stream) {
    return;
  }
  auto& g = *m_generation;
  m_head.clear();
  m_payload.clear();
  m_tail.clear();
  if (!g.header_sent && g.llama) {
    // cpp-httplib's headers (sorted), Keep-Alive included although the
    // connection closes after the stream (ENGINES.md, from a running server).
    m_head = fmt::format("HTTP/{}.{} 200 OK\r\nContent-Type: text/event-stream\r\nKeep-Alive: timeout=5, max=100\r\n"
                         "Server: llama.cpp\r\n{}X-Accel-Buffering: no\r\n\r\n",
                         m_version / 10, m_version % 10, chunked() ? "Transfer-Encoding: chunked\r\n" : "");
    g.header_sent = true;
  } else if (!g.header_sent) {
    m_head = fmt::format("HTTP/{}.{} 200 OK\r\ndate: {}\r\nserver: uvicorn\r\ncontent-type: text/event-stream; "
                         "charset=utf-8\r\n{}{}\r\n",
                         m_version / 10, m_version % 10, http_date(), chunked() ? "transfer-encoding: chunked\r\n" : "",
                         m_keep_alive && chunked() ? "" : "connection: close\r\n");
    g.header_sent = true;
  }
  if (g.request.endpoint == Endpoint::chat && !g.role_sent && (!g.llama || !g.pending.empty() || g.flood)) {
    // llama.cpp sends its role delta with the first token's result.
    if (g.llama) {
      g.llama->append_role(m_payload);
    } else {
      g.format.append_role(m_payload);
    }
    g.role_sent = true;
  }
  bool cut_now = false;
  format_events(g, cut_now);
  bool complete = false;
  if (cut_now) {
    // The cut-stream fault: the response ends cleanly, without usage or [DONE].
    complete = true;
    m_keep_alive = false;
    if (m_context.scheduler != nullptr) {
      m_context.scheduler->cancel(g.id);
    }
  } else if (g.emitted >= g.request.target_tokens && g.llama) {
    g.llama->append_final(m_payload, g.request.finish_reason, g.request.prompt_tokens, static_cast<int>(g.emitted),
                          llama_timings(g), g.request.include_usage);
    ChunkFormatter::append_done(m_payload);
    complete = true;
  } else if (g.emitted >= g.request.target_tokens) {
    if (g.request.include_usage) {
      g.format.append_usage(m_payload, g.request.prompt_tokens, static_cast<int>(g.emitted), reported_cached(g));
    }
    ChunkFormatter::append_done(m_payload);
    complete = true;
  }
  if (chunked()) {
    if (!m_payload.empty()) {
      m_head += fmt::format("{:x}\r\n", m_payload.size());
      m_tail = "\r\n";
    }
    if (complete) {
      m_tail += "0\r\n\r\n";
    }
  }
  if (m_head.empty() && m_payload.empty() && m_tail.empty()) {
    return;
  }
  m_writing = true;
  m_complete = complete;
  const std::array<net::const_buffer, 3> buffers{net::buffer(m_head), net::buffer(m_payload), net::buffer(m_tail)};
  m_stream.expires_after(k_write_timeout);
  net::async_write(m_stream, buffers, [self = shared_from_this()](const boost::system::error_code& error, std::size_t) {
    self->on_stream_written(error);
  });
}

void Session::on_stream_written(const boost::system::error_code& error) {
  m_writing = false;
  if (error) {
    abort_generation();
    return;
  }
  m_stream.expires_never();
  auto& g = *m_generation;
  if (g.dying && g.emitted * 2 >= g.request.target_tokens) {
    m_context.die();
  }
  if (m_complete) {
    const bool llama = g.llama.has_value();
    generation_ended();
    m_generation.reset();
    if (llama) {
      // llama-server closes the connection after every streamed response.
      close();
    } else if (m_keep_alive && chunked()) {
      read_request();
    } else {
      close();
    }
    return;
  }
  pump();
}

void Session::abort_generation() {
  if (m_generation && m_context.scheduler != nullptr) {
    m_context.scheduler->cancel(m_generation->id);
  }
  generation_ended();
  m_generation.reset();
  close();
}

} // namespace specctl::sim
