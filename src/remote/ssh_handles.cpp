#include "ssh_handles.hpp"

#include <mutex>

namespace specctl::remote::ssh {

void ensure_libssh2_initialized() {
  static std::once_flag once;
  // libssh2_exit is never called: sessions may live until static destruction.
  std::call_once(once, [] { libssh2_init(0); });
}

std::string last_error_message(LIBSSH2_SESSION* session) {
  if (session == nullptr) {
    return {};
  }
  char* message = nullptr;
  int length = 0;
  libssh2_session_last_error(session, &message, &length, 0);
  if (message == nullptr || length <= 0) {
    return {};
  }
  return std::string(message, static_cast<std::size_t>(length));
}

void free_agent(LIBSSH2_AGENT* agent) {
  libssh2_agent_disconnect(agent);
  libssh2_agent_free(agent);
}

} // namespace specctl::remote::ssh
