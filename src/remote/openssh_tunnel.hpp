#pragma once

// Forwarded ports of an OpenSshHost. Each listens on 127.0.0.1 here; a thread
// accepts connections and hands each to its own `ssh -W host:port` (stdin and
// stdout the accepted socket) over the master. OpenSSH's mux client passes
// the socket to the master, which then carries the bytes itself, so the
// `ssh -W` process only waits for the end.
//
// Why not `ssh -O forward -L`: a forward lives in the master and dies with
// it, so after a master restart every port would have to be added again, on
// the same port number, by whoever noticed, and connections in between would
// be refused. A listener of our own outlives any master; each new connection
// simply runs over the master of the moment (ControlMaster=auto starts one
// when none listens). The price is one short-lived process per connection,
// which the benchmark client's keep-alive connections make negligible.

#include "openssh_process.hpp"

#include <specctl/util/error.hpp>
#include <specctl/util/unique_fd.hpp>

#include <atomic>
#include <expected>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace specctl::remote::openssh {

class OpenSshHost;

class TunnelRelay {
public:
  // Starts the thread; throws std::system_error when it cannot.
  explicit TunnelRelay(const OpenSshHost& host);
  TunnelRelay(const TunnelRelay&) = delete;
  TunnelRelay& operator=(const TunnelRelay&) = delete;
  // Stops the thread, closes the listeners and kills every `ssh -W` still
  // carrying a connection (our children, so their connections close).
  ~TunnelRelay();

  // A new listener on 127.0.0.1 for `target_host:target_port` as the node sees it; its port.
  std::expected<int, Error> listen(const std::string& target_host, int target_port);

private:
  struct Listener {
    util::UniqueFd fd;
    std::string forward; // "-W" argument: host:port, [v6]:port
  };

  void run();
  void accept_all(const Listener& listener);
  void wake();

  const OpenSshHost& m_host;
  std::mutex m_mutex;
  std::vector<Listener> m_listeners; // guarded by m_mutex
  std::vector<Child> m_children;     // the thread's own
  util::UniqueFd m_wake;
  std::atomic<bool> m_stop{false};
  std::thread m_thread;
};

} // namespace specctl::remote::openssh
