#pragma once

#include <specctl/sim/http_server.hpp>
#include <specctl/sim/openai.hpp>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <chrono>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace specctl::sim {

// One client connection: reads requests one after another (keep-alive),
// answers the simple endpoints, and streams generations as the scheduler
// hands it tokens. Everything runs on the single event-loop thread.
class Session : public TokenSink, public std::enable_shared_from_this<Session> {
public:
  Session(boost::asio::ip::tcp::socket socket, ServerContext& context);

  void start();
  ~Session() override;
  void on_tokens(int tokens, bool finished) override;
  void on_emission(const Emission& emission) override;

private:
  enum class Kind { stream, whole, health };

  // The generation this connection is serving.
  struct Generation {
    Kind kind = Kind::stream;
    RequestId id = 0;
    GenerationRequest request{};
    ChunkFormatter format;
    std::vector<int> pending{}; // token counts not yet formatted, one event each
    long known = 0;             // tokens the scheduler has produced
    long emitted = 0;           // tokens formatted into events
    bool flood = false;
    bool header_sent = false;
    bool role_sent = false;
    bool cut = false;
    long cut_after = 0;
    bool dying = false;
    // llama.cpp's events and per-request timings (wall clock, as its slot measures).
    std::optional<LlamaFormatter> llama{};
    std::chrono::steady_clock::time_point submitted{};
    std::chrono::steady_clock::time_point first_at{};
    std::chrono::steady_clock::time_point last_at{};
    long verify_passes = 0;
    long spec_tokens = 0;
    int cached_tokens = 0; // from the prefix cache, known with the first token
    bool counted = false;  // in ServerContext::active_generations
  };

  void read_request();
  void on_read(const boost::system::error_code& error);
  void dispatch();
  void send_simple(unsigned status, std::string body, std::string_view content_type);
  void after_response(const boost::system::error_code& error);
  void handle_generation(Endpoint endpoint);
  void handle_health_generate();
  void handle_health();
  void handle_tokenize();
  // usage.prompt_tokens_details.cached_tokens where the engine reports it.
  std::optional<int> reported_cached(const Generation& generation) const;
  void send_llama_error(unsigned status, std::string_view type, std::string_view message);
  LlamaTimings llama_timings(const Generation& generation) const;
  void generation_ended();
  void pump();
  void format_events(Generation& generation, bool& cut_now);
  void on_stream_written(const boost::system::error_code& error);
  void abort_generation();
  void close();
  void access_log(unsigned status);
  bool chunked() const { return m_version >= 11; }

  boost::beast::tcp_stream m_stream;
  boost::beast::flat_buffer m_buffer;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> m_parser;
  ServerContext& m_context;
  std::string m_peer;
  std::string m_method;
  std::string m_target;
  unsigned m_version = 11;
  bool m_keep_alive = true;

  std::optional<Generation> m_generation;
  bool m_writing = false;
  bool m_complete = false;
  std::string m_head;
  std::string m_payload;
  std::string m_tail;
};

} // namespace specctl::sim
