#include "health_poll.hpp"

#include <specctl/http/get.hpp>

namespace specctl::server::detail {

namespace {

constexpr util::Duration k_health_request_timeout = std::chrono::seconds{5};
constexpr util::Duration k_health_connect_timeout = std::chrono::seconds{2};
// A health answer is a status; its body is never read, so a little is plenty.
constexpr std::size_t k_health_max_body = 4096;

} // namespace

HealthPoll::HealthPoll(std::string url, util::Duration interval)
    : m_url(std::move(url)), m_interval(interval), m_next(std::chrono::steady_clock::now()) {}

bool HealthPoll::answered_ok() {
  auto now = std::chrono::steady_clock::now();
  if (now < m_next) {
    return false;
  }
  m_next = now + m_interval;
  auto response = http::get(m_url, {k_health_connect_timeout, k_health_request_timeout, {}, k_health_max_body});
  return response && response->status == 200;
}

} // namespace specctl::server::detail
