#pragma once

// Move-only owners of the C handles the SSH host uses: file descriptors and
// libssh2's session, channel, agent and known-hosts objects.

#include <libssh2.h>

#include <string>
#include <utility>

namespace specctl::remote::ssh {

// libssh2_init is not thread-safe and must run once before any session exists.
void ensure_libssh2_initialized();

// libssh2's message for the session's last error, "" when there is none.
std::string last_error_message(LIBSSH2_SESSION* session);

class UniqueFd {
public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : m_fd(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : m_fd(std::exchange(other.m_fd, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      reset(std::exchange(other.m_fd, -1));
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return m_fd; }
  explicit operator bool() const { return m_fd >= 0; }
  void reset(int fd = -1);

private:
  int m_fd = -1;
};

// A handle whose C object is released by `Free`. Channels and agents need more
// than a plain free and get their own types below.
template <typename T, void (*Free)(T*)> class UniqueHandle {
public:
  UniqueHandle() = default;
  explicit UniqueHandle(T* handle) : m_handle(handle) {}
  UniqueHandle(UniqueHandle&& other) noexcept : m_handle(std::exchange(other.m_handle, nullptr)) {}
  UniqueHandle& operator=(UniqueHandle&& other) noexcept {
    if (this != &other) {
      reset(std::exchange(other.m_handle, nullptr));
    }
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  ~UniqueHandle() { reset(); }

  T* get() const { return m_handle; }
  explicit operator bool() const { return m_handle != nullptr; }
  void reset(T* handle = nullptr) {
    if (m_handle != nullptr) {
      Free(m_handle);
    }
    m_handle = handle;
  }

private:
  T* m_handle = nullptr;
};

void free_session(LIBSSH2_SESSION* session);
void free_known_hosts(LIBSSH2_KNOWNHOSTS* hosts);
void free_agent(LIBSSH2_AGENT* agent);

// Freeing a session also frees every channel libssh2 still holds for it, so the
// owner must shut the socket down first (see Connection): then no free can
// block or come back with EAGAIN.
using Session = UniqueHandle<LIBSSH2_SESSION, free_session>;
using KnownHosts = UniqueHandle<LIBSSH2_KNOWNHOSTS, free_known_hosts>;
// Disconnects from the agent socket, then frees.
using Agent = UniqueHandle<LIBSSH2_AGENT, free_agent>;

// A channel. On a live non-blocking session libssh2_channel_free may answer
// EAGAIN while it waits for the peer's close; then the channel stays on the
// session's list and libssh2_session_free releases it. The owner must
// therefore destroy every Channel before its Session, and hand channels it
// wants closed politely to the connection's reaper instead (see SshLoop).
class Channel {
public:
  Channel() = default;
  explicit Channel(LIBSSH2_CHANNEL* channel) : m_channel(channel) {}
  Channel(Channel&& other) noexcept : m_channel(std::exchange(other.m_channel, nullptr)) {}
  Channel& operator=(Channel&& other) noexcept {
    if (this != &other) {
      reset();
      m_channel = std::exchange(other.m_channel, nullptr);
    }
    return *this;
  }
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  ~Channel() { reset(); }

  LIBSSH2_CHANNEL* get() const { return m_channel; }
  explicit operator bool() const { return m_channel != nullptr; }
  // Gives up ownership without freeing: the session frees it later.
  LIBSSH2_CHANNEL* release() { return std::exchange(m_channel, nullptr); }
  void reset();

private:
  LIBSSH2_CHANNEL* m_channel = nullptr;
};

} // namespace specctl::remote::ssh
