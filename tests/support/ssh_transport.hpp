#pragma once

#include <cstdlib>
#include <string>
#include <string_view>

namespace specctl::test {

// What an experiment's SSH host adds to be reached with the transport under test:
// the suites' second pass (ctest names "run openssh: ...", "pool openssh: ...",
// "lifecycle openssh: ...") sets SPECCTL_TEST_SSH_TRANSPORT=openssh, and the same
// cases then go through the system ssh (ssh_testing.hpp's require_host_under_test).
inline bool testing_openssh() {
  const char* transport = std::getenv("SPECCTL_TEST_SSH_TRANSPORT");
  return transport != nullptr && std::string_view(transport) == "openssh";
}

inline std::string ssh_transport_yaml() {
  return testing_openssh() ? ", transport: openssh" : "";
}

} // namespace specctl::test
