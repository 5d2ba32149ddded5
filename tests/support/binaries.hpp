#pragma once

// Test support: where the build put the programs under test.

#include <string>

namespace specctl::test {

// The specctl binary of this build.
std::string specctl_binary();
// The specsim binary of this build, or empty when the build has none.
std::string specsim_binary();

} // namespace specctl::test
