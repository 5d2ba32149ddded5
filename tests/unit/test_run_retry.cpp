// The one retry policy of a run (src/run/retry.hpp): what is transient, how many
// attempts, and the doubling wait between them.

#include "../../src/run/retry.hpp"

#include <doctest/doctest.h>

using namespace specctl;
using namespace std::chrono_literals;
namespace detail = specctl::run::detail;

TEST_CASE("retry policy: attempts, a doubling wait capped at two minutes, and what is transient") {
  run::RunOptions options;
  options.retries = 3;
  options.retry_backoff = 5s;
  auto policy = detail::retry_policy(options);
  CHECK(policy.attempts() == 4);
  CHECK(policy.wait_before(2) == 5s);
  CHECK(policy.wait_before(3) == 10s);
  CHECK(policy.wait_before(4) == 20s);
  options.retry_backoff = 50s;
  CHECK(detail::retry_policy(options).wait_before(4) == detail::k_max_backoff);

  // --retries 0: one attempt; a teardown still tries its connection twice.
  options.retries = 0;
  CHECK(detail::retry_policy(options).attempts() == 1);
  CHECK(detail::retry_policy(options, 1).attempts() == 2);
  options.retries = -2;
  CHECK(detail::retry_policy(options).attempts() == 1);

  CHECK(detail::transient("bench c", Error("connection lost", ErrorKind::unreachable)));
  CHECK(detail::transient("connect", Error("no answer", ErrorKind::timed_out)));
  CHECK_FALSE(detail::transient("load", Error("not ready in 15m", ErrorKind::timed_out)));
  CHECK_FALSE(detail::transient("load", Error("the server died")));
}
