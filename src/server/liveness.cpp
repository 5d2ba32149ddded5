#include "liveness.hpp"

#include <fmt/format.h>

namespace specctl::server::detail {

bool has_ended(const remote::ServerPoll& poll) {
  return poll.exit_code || !poll.alive;
}

std::string how_it_ended(remote::Host& host, const remote::RunFiles& files, const remote::ServerPoll& poll) {
  // The poll read the exit file before it looked at the process: a shell that wrote
  // the code and ended in between reads as killed unless the file is read again.
  std::optional<int> code = poll.exit_code;
  if (!code) {
    if (auto again = remote::read_exit_code(host, files); again) {
      code = *again;
    }
  }
  return code ? fmt::format("exited with code {}", *code) : "was killed";
}

} // namespace specctl::server::detail
