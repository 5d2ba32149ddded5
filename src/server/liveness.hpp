#pragma once

// Private to src/server: whether a server process still lives, and how it ended.

#include <specctl/remote/host.hpp>
#include <specctl/remote/host_ops.hpp>

#include <string>

namespace specctl::server::detail {

// Whether the poll found the server process gone: it wrote an exit code, or it is not alive.
bool has_ended(const remote::ServerPoll& poll);

// How a server that has_ended ended: "exited with code N", or "was killed" when it left no code.
std::string how_it_ended(remote::Host& host, const remote::RunFiles& files, const remote::ServerPoll& poll);

} // namespace specctl::server::detail
