#pragma once

// Private to src/run: a server's liveness, watched while a benchmark runs.

#include <specctl/bench/result.hpp>
#include <specctl/remote/host.hpp>
#include <specctl/remote/host_ops.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

namespace specctl::run::detail {

// A dead server is noticed within this, and costs one round trip per period:
// the same status line the load's watch reads.
inline constexpr std::chrono::milliseconds k_watch_period{500};

// A round trip to the host this slow says the control connection stalled: an
// SSH tunnel that carried the benchmark's streams stalled with it.
inline constexpr std::chrono::seconds k_slow_watch_check{3};

// Polls the server's exit file and process from a thread of its own while a
// benchmark runs. The benchmark's stop flag is this watch's: it is set when the
// run's own stop flag is, and when the server dies, so no request is sent to a
// closed port once the server is gone.
class ServerWatch {
public:
  struct Death {
    // From the server's exit file; none when it was killed before it could write one.
    std::optional<int> exit_code;
    // Since the watch began.
    double after_s = 0;
  };

  // `heartbeat`: each poll also touches the server's heartbeat, which tells other runs
  // that the run owning it lives; a bench job on the host watches without it.
  ServerWatch(remote::Host& host, const remote::RunFiles& files, int pid, const std::atomic<bool>* outer_stop,
              bool heartbeat = true);
  ~ServerWatch();
  ServerWatch(const ServerWatch&) = delete;
  ServerWatch& operator=(const ServerWatch&) = delete;

  const std::atomic<bool>* stop_flag() const { return &m_stop; }
  // Asks for a check now, not at the next period: a request failed of `kind`. A
  // failure on the connection itself (refused, closed with no answer) is what a
  // dead server gives: new requests are held until the check has answered.
  void poke(bench::FailureKind kind);
  const std::atomic<bool>* hold_flag() const { return &m_hold; }
  // Set once the server was seen dead; asks once more when the benchmark ended
  // on its own first (a death in the last moments is still a death).
  std::optional<Death> death();
  // Round trips to the host that failed or took longer than k_slow_watch_check,
  // counting one still in flight that has taken that long: a benchmark through
  // the connection's tunnel measured the connection's trouble, not the server.
  int troubles() const;

private:
  void loop();
  bool check();

  remote::Host& m_host;
  remote::RunFiles m_files;
  int m_pid;
  bool m_heartbeat = true;
  const std::atomic<bool>* m_outer;
  std::chrono::steady_clock::time_point m_started = std::chrono::steady_clock::now();
  std::atomic<bool> m_stop{false};
  std::atomic<bool> m_hold{false};
  std::atomic<int> m_troubles{0};
  // When the round trip in flight began (steady clock ticks); 0 when none is.
  std::atomic<std::chrono::steady_clock::rep> m_check_since{0};
  std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_quit = false;
  bool m_poked = false;
  std::optional<Death> m_death;
  std::thread m_thread;
};

} // namespace specctl::run::detail
