#pragma once

// Private to src/server: the health poll of wait_ready.

#include <specctl/util/duration.hpp>

#include <chrono>
#include <string>

namespace specctl::server::detail {

// Asks a server's health endpoint, at most once per `interval`: the first call asks at once.
class HealthPoll {
public:
  HealthPoll(std::string url, util::Duration interval);

  // True when a request was due and the server answered 200; false when it was
  // not due yet, did not answer, or answered anything else.
  bool answered_ok();

private:
  std::string m_url;
  util::Duration m_interval;
  std::chrono::steady_clock::time_point m_next;
};

} // namespace specctl::server::detail
