#pragma once

#include <stdexcept>
#include <string>

namespace specctl {

// How a failure ended, so callers and users can tell a slow thing from a broken one.
// unreachable: the host could not be reached or the connection to it was lost
// for good; unlike a failure of the thing being run, trying again later may work.
enum class ErrorKind { failed, timed_out, bad_input, interrupted, unreachable };

// The one error type of specctl. Low layers return it in std::expected; high
// layers throw it, and main() catches it once to print and pick the exit code.
class Error : public std::runtime_error {
public:
  explicit Error(std::string message, ErrorKind kind = ErrorKind::failed)
      : std::runtime_error(std::move(message)), m_kind(kind) {}

  ErrorKind kind() const { return m_kind; }
  bool timed_out() const { return m_kind == ErrorKind::timed_out; }
  bool unreachable() const { return m_kind == ErrorKind::unreachable; }

private:
  ErrorKind m_kind;
};

// Exit codes, documented in README.md.
inline constexpr int k_exit_ok = 0;
inline constexpr int k_exit_failures = 1;
inline constexpr int k_exit_bad_input = 2;
inline constexpr int k_exit_interrupted = 130;
// Interrupted by SIGHUP (128 + 1): the terminal or the SSH session that ran specctl closed.
inline constexpr int k_exit_hangup = 129;

} // namespace specctl
