#pragma once

// Test support: a tiny OpenAI-style streaming server whose every byte and every
// timing is scripted: the "known token schedule" the benchmark engine is
// checked against, and the deliberately broken server (500s, garbled events,
// cut streams, slow accepts, garbage, hangs). Listens on 127.0.0.1 only; runs
// on its own thread; stopped and joined by its destructor.

#include "wait.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace specctl::test {

enum class UsageStyle {
  final_chunk,     // a chunk with "choices": [] and usage before [DONE] (include_usage)
  on_last_content, // usage on the last content chunk, no separate chunk
  every_chunk,     // cumulative usage on every content chunk, then the final usage chunk
  none,            // no usage at all
};

// How the server answers one request.
struct Behavior {
  // Output tokens; 0 takes "max_tokens" from the request body.
  int tokens = 0;
  int tokens_per_chunk = 1;
  // From reading the request to the first content chunk, and between content chunks.
  std::chrono::microseconds ttft{0};
  std::chrono::microseconds itl{0};
  UsageStyle usage = UsageStyle::final_chunk;
  // Not 200: a JSON error body and no stream.
  int status = 200;
  // Content chunk index whose JSON is broken (-1: none).
  int garble_at = -1;
  // Close the connection after this many content chunks, mid-stream (-1: never).
  int cut_after = -1;
  // End the body cleanly but without "data: [DONE]".
  bool no_done = false;
  // Send {"error": ...} as an event after the first content chunk.
  bool error_event = false;
  // Answer with bytes that are not HTTP, then close.
  bool garbage_reply = false;
  // Read the request and never answer.
  bool hang = false;
  // Read the request, then close the connection without a byte of answer.
  bool drop = false;
  // Stop sending after this many content chunks and keep the connection open (-1: never).
  int stall_after = -1;
  // As llama.cpp's llama-server: answer "Keep-Alive: timeout=5, max=100", then
  // close the connection this long after the stream ended, without reading what
  // the client sent on it meanwhile (negative: keep the connection).
  std::chrono::milliseconds close_after_stream{-1};
  // Write the whole stream at once, after the TTFT: many events per read.
  bool one_write = false;
  // Write each event in pieces of a few bytes: events split across reads.
  bool split_writes = false;
  // Interleave ": ping" comments and use CRLF line ends.
  bool comments_and_crlf = false;
};

// What the server did for one request: the truth measurements are checked against.
struct Served {
  int index = 0;
  int connection = 0;
  std::string path;
  std::string body;
  Clock::time_point received;
  // When each content chunk was handed to the socket, and its tokens.
  std::vector<Clock::time_point> writes;
  std::vector<int> tokens;
  bool finished = false;
};

struct ServerOptions {
  // Waits this long before each accept(): the kernel completes the TCP
  // handshake, so clients see a slow first byte, not a refused connection.
  std::chrono::milliseconds accept_delay{0};
  std::string model = "script-model";
};

class ScriptServer {
public:
  // `script` picks the behaviour of the n-th generation request (0-based, over all connections).
  using Script = std::function<Behavior(int index, const std::string& path, const std::string& body)>;

  explicit ScriptServer(Script script, ServerOptions options = {});
  ~ScriptServer();
  ScriptServer(const ScriptServer&) = delete;
  ScriptServer& operator=(const ScriptServer&) = delete;

  int port() const;
  std::string url() const;
  // TCP connections accepted so far.
  int connections() const;
  // Generation requests answered (or abandoned) so far, in order of arrival.
  // The server records a request just after its last byte: call wait_idle()
  // first when the client has only just finished.
  std::vector<Served> served() const;
  // Waits until no request is being answered; false at the timeout.
  bool wait_idle(std::chrono::milliseconds timeout = std::chrono::seconds{10}) const;

  struct State;

private:
  std::unique_ptr<State> m_state;
  std::thread m_thread;
};

} // namespace specctl::test
