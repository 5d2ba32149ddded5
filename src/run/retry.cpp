#include "retry.hpp"

#include <algorithm>

namespace specctl::run::detail {

util::Duration RetryPolicy::wait_before(int attempt) const {
  util::Duration wait = backoff;
  for (int k = 2; k < attempt && wait < k_max_backoff; ++k) {
    wait *= 2;
  }
  return std::min(wait, k_max_backoff);
}

RetryPolicy retry_policy(const RunOptions& options, int at_least) {
  return {std::max(options.retries, at_least), options.retry_backoff};
}

bool transient(const std::string& phase, const Error& error) {
  return error.unreachable() || (phase == "connect" && error.timed_out());
}

} // namespace specctl::run::detail
