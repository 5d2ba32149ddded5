#include "run_context.hpp"

#include <thread>

namespace specctl::run::detail {

namespace {
constexpr util::Duration k_stop_poll = std::chrono::milliseconds{100};
} // namespace

bool sleep_or_stop(util::Duration duration, const std::atomic<bool>* stop) {
  auto end = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < end) {
    if (stop != nullptr && stop->load()) {
      return true;
    }
    std::this_thread::sleep_for(std::min<util::Duration>(
        k_stop_poll, std::chrono::duration_cast<util::Duration>(end - std::chrono::steady_clock::now())));
  }
  return stop != nullptr && stop->load();
}

} // namespace specctl::run::detail
