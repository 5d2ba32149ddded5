#pragma once

// The one retry policy of a run: which failures are transient (trying again may
// mend them), how many times an attempt is made again, and how long to wait
// before each. The scheduler retries a variant by it, the teardown its connection.

#include <specctl/run/runner.hpp>
#include <specctl/util/duration.hpp>
#include <specctl/util/error.hpp>

#include <string>

namespace specctl::run::detail {

// No wait between attempts is longer than this.
inline constexpr util::Duration k_max_backoff = std::chrono::minutes{2};

struct RetryPolicy {
  // Attempts after the first.
  int retries = 0;
  // The wait before the second attempt, doubled before each next one.
  util::Duration backoff{};

  int attempts() const { return 1 + (retries > 0 ? retries : 0); }
  // The wait before attempt `attempt` (2, 3, ...): backoff, 2 backoff, 4 backoff, ...
  // at most k_max_backoff.
  util::Duration wait_before(int attempt) const;
};

// --retries and --retry-backoff; `at_least` retries whatever they say (a
// teardown always tries its connection again once: a server must not be left).
RetryPolicy retry_policy(const RunOptions& options, int at_least = 0);

// A failure in `phase` that trying again may mend: the host could not be
// reached or the connection to it was lost, or connecting to it timed out.
bool transient(const std::string& phase, const Error& error);

} // namespace specctl::run::detail
