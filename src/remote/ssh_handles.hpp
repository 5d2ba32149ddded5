#pragma once

// Move-only owners of the C handles the SSH host uses: file descriptors and
// libssh2's session, channel, agent and known-hosts objects, all util's
// UniqueFd and UniqueHandle.

#include <specctl/util/unique_fd.hpp>
#include <specctl/util/unique_handle.hpp>

#include <libssh2.h>

#include <string>

namespace specctl::remote::ssh {

// libssh2_init is not thread-safe and must run once before any session exists.
void ensure_libssh2_initialized();

// libssh2's message for the session's last error, "" when there is none.
std::string last_error_message(LIBSSH2_SESSION* session);

void free_agent(LIBSSH2_AGENT* agent);

// Freeing a session also frees every channel libssh2 still holds for it, so the
// owner must shut the socket down first (see Connection): then no free can
// block or come back with EAGAIN.
using Session = util::UniqueHandle<LIBSSH2_SESSION, libssh2_session_free>;
using KnownHosts = util::UniqueHandle<LIBSSH2_KNOWNHOSTS, libssh2_knownhost_free>;
// Disconnects from the agent socket, then frees.
using Agent = util::UniqueHandle<LIBSSH2_AGENT, free_agent>;

// A channel. On a live non-blocking session libssh2_channel_free may answer
// EAGAIN while it waits for the peer's close; then the channel stays on the
// session's list and libssh2_session_free releases it. The owner must
// therefore destroy every Channel before its Session, and hand channels it
// wants closed politely to the connection's reaper instead (see SshLoop).
// release() gives up ownership without freeing: the session frees it later.
using Channel = util::UniqueHandle<LIBSSH2_CHANNEL, libssh2_channel_free>;

} // namespace specctl::remote::ssh
