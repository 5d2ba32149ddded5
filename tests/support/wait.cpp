#include "wait.hpp"

#include <thread>

namespace specctl::test {

bool wait_until(const std::function<bool()>& done, Clock::duration timeout, Clock::duration poll) {
  const auto deadline = Clock::now() + timeout;
  while (!done()) {
    if (Clock::now() >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(poll);
  }
  return true;
}

} // namespace specctl::test
