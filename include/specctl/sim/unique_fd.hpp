#pragma once

// The simulator's file descriptors use the project's one owner type.
#include <specctl/util/unique_fd.hpp>

namespace specctl::sim {

using util::UniqueFd;

} // namespace specctl::sim
