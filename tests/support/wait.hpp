#pragma once

// Test support: bounded waiting. Every wait in a test has a deadline; these are
// the deadlines the fixtures share and the one polling loop.

#include <chrono>
#include <functional>

namespace specctl::test {

using Clock = std::chrono::steady_clock;

// How often a polling wait looks again.
inline constexpr std::chrono::milliseconds k_poll_interval{20};
// wait_until's default bound: what a test waits for takes a second or two.
inline constexpr std::chrono::seconds k_wait_timeout{20};
// How long a server a test starts (specsim) gets to answer its health check on a
// loaded two-core machine.
inline constexpr std::chrono::seconds k_ready_timeout{30};

// Polls `done` every `poll` until it holds or `timeout` passes; returns whether it held.
bool wait_until(const std::function<bool()>& done, Clock::duration timeout = k_wait_timeout,
                Clock::duration poll = k_poll_interval);

} // namespace specctl::test
