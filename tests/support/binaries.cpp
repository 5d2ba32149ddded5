#include "binaries.hpp"

namespace specctl::test {

std::string specctl_binary() {
  return SPECCTL_BINARY;
}

std::string specsim_binary() {
#ifdef SPECSIM_BINARY
  return SPECSIM_BINARY;
#else
  return {};
#endif
}

} // namespace specctl::test
