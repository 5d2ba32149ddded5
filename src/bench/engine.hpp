#pragma once

// The event loop: one libcurl multi handle driven by epoll through
// curl_multi_socket_action, so the cost of a wake-up does not grow with the
// number of idle streams.

#include "stream.hpp"

#include <specctl/bench/bench.hpp>
#include <specctl/http/curl.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace specctl::bench::detail {

// The phase of the requests every mode sends before measuring.
inline constexpr const char* k_warmup_phase = "warmup";

// What one level sends.
struct LevelPlan {
  std::string phase;
  int count = 0;
  // Closed loop: requests kept in flight. Open loop: the most in flight, 0 for no limit.
  int limit = 1;
  // Open loop: start offsets in seconds from the level's start, one per request. Empty: closed loop.
  std::vector<double> arrivals;
};

// Owns the epoll descriptor; declared before the multi handle so it outlives it.
class EpollFd {
public:
  EpollFd();
  ~EpollFd();
  EpollFd(const EpollFd&) = delete;
  EpollFd& operator=(const EpollFd&) = delete;
  int get() const { return m_fd; }

private:
  int m_fd = -1;
};

class Engine {
public:
  // `target` must be resolved; `max_streams` is the most requests ever in
  // flight, or (FdLimit::best_effort) a guess at it that need not be met.
  Engine(const Target& target, const RunOptions& options, int max_streams,
         http::FdLimit fd_limit = http::FdLimit::required);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  LevelResult run_level(const LevelPlan& plan);
  // Leaves `connections` kept-alive connections in curl's cache, ready for
  // the next level. Failures are ignored: the measured requests will meet them.
  void preconnect(int connections);
  // True once the stop flag or the deadline was seen: callers run no further levels.
  bool stopped() const { return m_ended != Ended::normally; }
  Ended ended() const { return m_ended; }

private:
  static int on_socket(CURL* easy, curl_socket_t socket, int what, void* user, void* socket_data);
  static int on_timer(CURLM* multi, long timeout_ms, void* user);
  void start(const std::string& phase, int index, Clock::time_point level_start, Clock::time_point intended,
             Stream::Origin origin);
  // Waits for socket activity or `until`, then lets curl act on it.
  void poll_once(Clock::time_point until);
  // Moves finished transfers into `records`; returns how many.
  int collect(std::vector<RequestRecord>& records);
  // Ends the transfers that received no byte for the idle timeout, as stalled; returns how many.
  int end_stalled(std::vector<RequestRecord>& records);
  void abandon_all(std::vector<RequestRecord>& records, FailureKind kind, const std::string& why);
  bool stop_requested() const;

  Target m_target;
  const RunOptions& m_options;
  std::string m_url;
  http::HeaderList m_headers;
  // One body per prompt, reused, when the prompts are not made unique.
  std::vector<std::string> m_bodies;
  EpollFd m_epoll;
  http::Multi m_multi;
  bool m_have_pwait2 = true;
  std::optional<Clock::time_point> m_curl_deadline;
  std::vector<std::unique_ptr<Stream>> m_streams;
  std::vector<Stream*> m_idle;
  std::vector<Stream*> m_busy;
  Ended m_ended = Ended::normally;
};

} // namespace specctl::bench::detail
