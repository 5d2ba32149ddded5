#include "script_server.hpp"

#include <boost/asio.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>

namespace specctl::test {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;

struct ScriptServer::State {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  Script script;
  ServerOptions options;
  int port = 0;
  std::atomic<int> connections{0};
  std::atomic<int> requests{0};
  std::atomic<int> answering{0};
  mutable std::mutex mutex;
  std::vector<Served> served;
};

namespace {

// Pieces of an event written separately when a behaviour asks for split writes.
constexpr std::size_t k_split_piece = 7;

struct Request {
  std::string method;
  std::string path;
  std::string body;
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

awaitable<std::optional<Request>> read_request(tcp::socket& socket, std::string& buffer) {
  const std::size_t end =
      co_await asio::async_read_until(socket, asio::dynamic_buffer(buffer), "\r\n\r\n", use_awaitable);
  const std::string head = buffer.substr(0, end);
  buffer.erase(0, end);
  Request request;
  const auto first_space = head.find(' ');
  const auto second_space = head.find(' ', first_space + 1);
  if (first_space == std::string::npos || second_space == std::string::npos) {
    co_return std::nullopt;
  }
  request.method = head.substr(0, first_space);
  request.path = head.substr(first_space + 1, second_space - first_space - 1);
  std::size_t length = 0;
  const std::string lowered = lower(head);
  if (const auto at = lowered.find("\r\ncontent-length:"); at != std::string::npos) {
    length = std::stoul(lowered.substr(at + 17));
  }
  if (buffer.size() < length) {
    co_await asio::async_read(socket, asio::dynamic_buffer(buffer), asio::transfer_exactly(length - buffer.size()),
                              use_awaitable);
  }
  request.body = buffer.substr(0, length);
  buffer.erase(0, length);
  co_return request;
}

std::string frame(std::string_view data) {
  return fmt::format("{:x}\r\n{}\r\n", data.size(), data);
}

std::string usage_json(int completion) {
  return fmt::format(R"("usage":{{"prompt_tokens":5,"completion_tokens":{},"total_tokens":{}}})", completion,
                     completion + 5);
}

class Writer {
public:
  Writer(tcp::socket& socket, const Behavior& behavior) : m_socket(socket), m_behavior(behavior) {}

  // Queues or writes one event (its text without the "data: " prefix).
  awaitable<void> event(std::string_view data) {
    const char* end = m_behavior.comments_and_crlf ? "\r\n\r\n" : "\n\n";
    std::string text;
    if (m_behavior.comments_and_crlf) {
      text += ": ping\r\n\r\n";
    }
    text += fmt::format("data: {}{}", data, end);
    co_await raw(text);
  }

  awaitable<void> raw(std::string_view text) {
    if (m_behavior.one_write) {
      m_pending += text;
      co_return;
    }
    if (m_behavior.split_writes) {
      for (std::size_t at = 0; at < text.size(); at += k_split_piece) {
        co_await asio::async_write(m_socket, asio::buffer(frame(text.substr(at, k_split_piece))), use_awaitable);
      }
      co_return;
    }
    co_await asio::async_write(m_socket, asio::buffer(frame(text)), use_awaitable);
  }

  awaitable<void> flush() {
    if (!m_pending.empty()) {
      const std::string framed = frame(m_pending);
      m_pending.clear();
      co_await asio::async_write(m_socket, asio::buffer(framed), use_awaitable);
    }
  }

private:
  tcp::socket& m_socket;
  const Behavior& m_behavior;
  std::string m_pending;
};

// Answers one generation request; false when the connection must close.
awaitable<bool> generate(tcp::socket& socket, const Behavior& b, const Request& request, Served& served,
                         const std::string& model) {
  if (b.hang) {
    // Longer than any test: the destructor ends the wait.
    asio::steady_timer forever(socket.get_executor(), std::chrono::hours{24});
    co_await forever.async_wait(use_awaitable);
    co_return false;
  }
  if (b.drop) {
    socket.close();
    co_return false;
  }
  if (b.garbage_reply) {
    co_await asio::async_write(socket, asio::buffer(std::string("SSH-2.0-OpenSSH_9.2\r\nthis is not HTTP\r\n")),
                               use_awaitable);
    co_return false;
  }
  if (b.status != 200) {
    const std::string body = R"({"object":"error","message":"scripted failure","type":"InternalServerError","code":)" +
                             std::to_string(b.status) + "}";
    co_await asio::async_write(socket,
                               asio::buffer(fmt::format("HTTP/1.1 {} Scripted\r\nContent-Type: application/json\r\n"
                                                        "Content-Length: {}\r\n\r\n{}",
                                                        b.status, body.size(), body)),
                               use_awaitable);
    co_return true;
  }
  int tokens = b.tokens;
  if (tokens <= 0) {
    const auto json = nlohmann::json::parse(request.body, nullptr, false);
    tokens = json.is_object() && json.contains("max_tokens") ? json["max_tokens"].get<int>() : 16;
  }
  const bool chat = request.path.find("chat") != std::string::npos;
  const std::string id = fmt::format("req-{}", served.index);
  const std::string head = fmt::format(R"("id":"{}","object":"{}","created":0,"model":"{}")", id,
                                       chat ? "chat.completion.chunk" : "text_completion", model);
  co_await asio::async_write(
      socket,
      asio::buffer(std::string("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                               "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n") +
                   (b.close_after_stream.count() >= 0 ? "Keep-Alive: timeout=5, max=100\r\n" : "") + "\r\n"),
      use_awaitable);
  Writer writer(socket, b);
  if (chat) {
    co_await writer.event(fmt::format(
        R"({{{},"choices":[{{"index":0,"delta":{{"role":"assistant","content":""}},"finish_reason":null}}]}})", head));
  }
  asio::steady_timer timer(socket.get_executor());
  auto next = served.received + b.ttft;
  int emitted = 0;
  int chunk = 0;
  while (emitted < tokens) {
    const int k = std::min(std::max(b.tokens_per_chunk, 1), tokens - emitted);
    if (!b.one_write || chunk == 0) {
      timer.expires_at(next);
      co_await timer.async_wait(use_awaitable);
    }
    std::string text;
    for (int t = 0; t < k; ++t) {
      text += " tok";
    }
    const bool last = emitted + k == tokens;
    std::string extra;
    if (b.usage == UsageStyle::every_chunk || (b.usage == UsageStyle::on_last_content && last)) {
      extra = "," + usage_json(emitted + k);
    }
    const std::string finish = last ? "\"length\"" : "null";
    std::string event =
        chat ? fmt::format(R"({{{},"choices":[{{"index":0,"delta":{{"content":"{}"}},"finish_reason":{}}}]{}}})", head,
                           text, finish, extra)
             : fmt::format(R"({{{},"choices":[{{"index":0,"text":"{}","logprobs":null,"finish_reason":{}}}]{}}})", head,
                           text, finish, extra);
    if (chunk == b.garble_at) {
      event = fmt::format(R"({{"id":"{}","choices":[{{"text":"{} broken)", id, text);
    }
    served.writes.push_back(Clock::now());
    served.tokens.push_back(k);
    co_await writer.event(event);
    if (b.error_event && chunk == 0) {
      co_await writer.event(R"({"error":{"message":"scripted error event","type":"server_error","code":500}})");
    }
    emitted += k;
    ++chunk;
    if (chunk == b.stall_after) {
      co_await writer.flush();
      asio::steady_timer forever(socket.get_executor(), std::chrono::hours{24});
      co_await forever.async_wait(use_awaitable);
      co_return false;
    }
    if (chunk == b.cut_after) {
      co_await writer.flush();
      socket.shutdown(tcp::socket::shutdown_both);
      socket.close();
      co_return false;
    }
    next += b.itl;
  }
  if (b.usage == UsageStyle::final_chunk || b.usage == UsageStyle::every_chunk) {
    co_await writer.event(fmt::format(R"({{{},"choices":[],{}}})", head, usage_json(tokens)));
  }
  if (!b.no_done) {
    co_await writer.event("[DONE]");
  }
  co_await writer.flush();
  co_await asio::async_write(socket, asio::buffer(std::string("0\r\n\r\n")), use_awaitable);
  served.finished = true;
  if (b.close_after_stream.count() >= 0) {
    timer.expires_after(b.close_after_stream);
    co_await timer.async_wait(use_awaitable);
    socket.close();
    co_return false;
  }
  co_return true;
}

awaitable<void> session(ScriptServer::State* state, tcp::socket socket, int connection) {
  std::string buffer;
  try {
    while (true) {
      auto request = co_await read_request(socket, buffer);
      if (!request) {
        co_return;
      }
      if (request->method == "GET" && request->path == "/v1/models") {
        const std::string body =
            fmt::format(R"({{"object":"list","data":[{{"id":"{}","object":"model"}}]}})", state->options.model);
        co_await asio::async_write(socket,
                                   asio::buffer(fmt::format("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                                            "Content-Length: {}\r\n\r\n{}",
                                                            body.size(), body)),
                                   use_awaitable);
        continue;
      }
      const int index = state->requests.fetch_add(1);
      state->answering.fetch_add(1);
      const Behavior behavior = state->script(index, request->path, request->body);
      Served served;
      served.index = index;
      served.connection = connection;
      served.path = request->path;
      served.body = request->body;
      served.received = Clock::now();
      std::size_t slot = 0;
      {
        std::lock_guard lock(state->mutex);
        slot = state->served.size();
        state->served.push_back(served);
      }
      bool keep = false;
      try {
        keep = co_await generate(socket, behavior, *request, served, state->options.model);
      } catch (...) {
        keep = false;
      }
      {
        std::lock_guard lock(state->mutex);
        state->served[slot] = served;
      }
      state->answering.fetch_sub(1);
      if (!keep) {
        co_return;
      }
    }
  } catch (...) {
    // The client went away: nothing to answer.
  }
}

awaitable<void> accept_loop(ScriptServer::State* state) {
  asio::steady_timer delay(state->io);
  while (true) {
    if (state->options.accept_delay.count() > 0) {
      delay.expires_after(state->options.accept_delay);
      co_await delay.async_wait(use_awaitable);
    }
    tcp::socket socket = co_await state->acceptor.async_accept(use_awaitable);
    socket.set_option(tcp::no_delay(true));
    const int connection = state->connections.fetch_add(1);
    asio::co_spawn(state->io, session(state, std::move(socket), connection), asio::detached);
  }
}

} // namespace

ScriptServer::ScriptServer(Script script, ServerOptions options) : m_state(std::make_unique<State>()) {
  m_state->script = std::move(script);
  m_state->options = std::move(options);
  const tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), 0);
  m_state->acceptor.open(endpoint.protocol());
  m_state->acceptor.set_option(tcp::acceptor::reuse_address(true));
  m_state->acceptor.bind(endpoint);
  m_state->acceptor.listen(asio::socket_base::max_listen_connections);
  m_state->port = m_state->acceptor.local_endpoint().port();
  asio::co_spawn(m_state->io, accept_loop(m_state.get()), asio::detached);
  m_thread = std::thread([state = m_state.get()] { state->io.run(); });
}

ScriptServer::~ScriptServer() {
  m_state->io.stop();
  m_thread.join();
}

int ScriptServer::port() const {
  return m_state->port;
}

std::string ScriptServer::url() const {
  return fmt::format("http://127.0.0.1:{}", m_state->port);
}

int ScriptServer::connections() const {
  return m_state->connections.load();
}

bool ScriptServer::wait_idle(std::chrono::milliseconds timeout) const {
  const auto deadline = Clock::now() + timeout;
  while (m_state->answering.load() > 0) {
    if (Clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{1});
  }
  return true;
}

std::vector<Served> ScriptServer::served() const {
  std::lock_guard lock(m_state->mutex);
  return m_state->served;
}

} // namespace specctl::test
