#include "ssh_connection.hpp"

#include <specctl/util/duration.hpp>
#include <specctl/util/text.hpp>

#include <fmt/format.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <system_error>
#include <vector>

namespace specctl::remote::ssh {

namespace {

namespace fs = std::filesystem;

// Tried, in this order, when no identity is configured (OpenSSH's defaults
// that libssh2 1.10 can use).
constexpr std::array<std::string_view, 3> k_default_keys = {"~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa"};

bool exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

bool is_transport_error(int rc) {
  return rc == LIBSSH2_ERROR_SOCKET_SEND || rc == LIBSSH2_ERROR_SOCKET_RECV || rc == LIBSSH2_ERROR_SOCKET_DISCONNECT ||
         rc == LIBSSH2_ERROR_SOCKET_TIMEOUT || rc == LIBSSH2_ERROR_BAD_SOCKET;
}

// The base64 key of an OpenSSH public key file ("type BASE64 comment"); empty when unreadable.
std::string public_key_base64(const std::string& path) {
  std::ifstream in(path);
  std::string type;
  std::string base64;
  if (!(in >> type >> base64)) {
    return {};
  }
  return base64;
}

class Authenticator {
public:
  Authenticator(LIBSSH2_SESSION* session, int fd, const SshTarget& target, Clock::time_point deadline,
                const StopSignal& stop)
      : m_session(session), m_fd(fd), m_target(target), m_deadline(deadline), m_stop(stop) {}

  // Every attempt's outcome, for the error message. Never holds key material.
  std::vector<std::string> tried;

  // Negative libssh2 codes for failures that end all further attempts.
  int try_key_file(const std::string& configured) {
    auto path = expand_home(configured);
    if (!exists(path)) {
      tried.push_back(fmt::format("{} (no such file)", configured));
      return 0;
    }
    // Derive the public key from the private one unless its .pub is beside it.
    auto public_path = path + ".pub";
    const char* public_key = exists(public_path) ? public_path.c_str() : nullptr;
    int rc = run([&] {
      return libssh2_userauth_publickey_fromfile_ex(
          m_session, m_target.user.c_str(), static_cast<unsigned>(m_target.user.size()), public_key, path.c_str(), "");
    });
    if (rc == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED && last_error_message(m_session) == "Callback returned error") {
      // libssh2 1.10 reports a private key it could not read for signing (it
      // needs a passphrase) as an unverified key: the server never saw it.
      tried.push_back(fmt::format("{} (cannot be used: it needs a passphrase, which specctl never asks for; load it "
                                  "into ssh-agent)",
                                  configured));
      return 0;
    }
    return record(configured, rc);
  }

  int try_agent() {
    const char* socket = std::getenv("SSH_AUTH_SOCK");
    if (socket == nullptr || *socket == '\0') {
      tried.push_back("ssh-agent (SSH_AUTH_SOCK is not set)");
      return 0;
    }
    Agent agent(libssh2_agent_init(m_session));
    if (!agent) {
      tried.push_back("ssh-agent (libssh2 could not use it)");
      return 0;
    }
    // Talking to the agent is local and blocking in libssh2; only the
    // signature's round trip to the server is non-blocking.
    if (libssh2_agent_connect(agent.get()) != 0 || libssh2_agent_list_identities(agent.get()) != 0) {
      tried.push_back(fmt::format("ssh-agent at {} (cannot reach it)", socket));
      return 0;
    }
    libssh2_agent_publickey* identity = nullptr;
    int count = 0;
    while (libssh2_agent_get_identity(agent.get(), &identity, identity) == 0) {
      if (m_target.identities_only && !is_configured(identity)) {
        continue;
      }
      ++count;
      int rc = run([&] { return libssh2_agent_userauth(agent.get(), m_target.user.c_str(), identity); });
      if (rc == 0) {
        return 1;
      }
      if (rc == LIBSSH2_ERROR_TIMEOUT || is_transport_error(rc)) {
        return record("ssh-agent", rc);
      }
    }
    tried.push_back(count == 0 ? std::string(m_target.identities_only ? "ssh-agent (holds none of the IdentityFiles, "
                                                                        "and IdentitiesOnly is set)"
                                                                      : "ssh-agent (holds no keys)")
                               : fmt::format("ssh-agent ({} keys, all refused)", count));
    return 0;
  }

  bool authenticated() const { return libssh2_userauth_authenticated(m_session) != 0; }

private:
  // Whether an agent key is the public half of a configured identity file.
  bool is_configured(const libssh2_agent_publickey* identity) const {
    for (const auto& configured : m_target.identities) {
      auto recorded = public_key_base64(expand_home(configured) + ".pub");
      auto offered = util::base64(std::string_view(reinterpret_cast<const char*>(identity->blob), identity->blob_len));
      if (!recorded.empty() && recorded == offered) {
        return true;
      }
    }
    return false;
  }

  template <typename Call> int run(Call&& call) {
    return run_until_done(m_session, m_fd, m_deadline, m_stop, std::forward<Call>(call));
  }

  // Returns 1 on success, 0 to try the next key, negative to stop.
  int record(std::string_view what, int rc) {
    if (rc == 0) {
      return 1;
    }
    if (rc == LIBSSH2_ERROR_AUTHENTICATION_FAILED || rc == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED) {
      tried.push_back(fmt::format("{} (refused by the server)", what));
      return 0;
    }
    if (rc == LIBSSH2_ERROR_FILE) {
      // Encrypted keys land here too: libssh2 gets no passphrase from us.
      tried.push_back(fmt::format("{} (cannot be used: {}; a key with a passphrase must be loaded into ssh-agent)",
                                  what, last_error_message(m_session)));
      return 0;
    }
    if (rc == LIBSSH2_ERROR_TIMEOUT || is_transport_error(rc)) {
      return rc;
    }
    tried.push_back(fmt::format("{} ({})", what, last_error_message(m_session)));
    return 0;
  }

  LIBSSH2_SESSION* m_session;
  int m_fd;
  const SshTarget& m_target;
  Clock::time_point m_deadline;
  const StopSignal& m_stop;
};

} // namespace

std::expected<void, ConnectFailure> authenticate(LIBSSH2_SESSION* session, int fd, const SshTarget& target,
                                                 Clock::time_point deadline, const StopSignal& stop) {
  Authenticator auth(session, fd, target, deadline, stop);
  // The configured identities in order, then the agent; the default key files
  // only when no identity is configured.
  int rc = 0;
  for (auto key = target.identities.begin(); rc == 0 && key != target.identities.end(); ++key) {
    rc = auth.try_key_file(*key);
  }
  if (rc == 0) {
    rc = auth.try_agent();
  }
  bool configured = !target.identities.empty();
  bool any_default_key = false;
  for (auto key = k_default_keys.begin(); rc == 0 && !configured && key != k_default_keys.end(); ++key) {
    if (exists(expand_home(std::string(*key)))) {
      any_default_key = true;
      rc = auth.try_key_file(std::string(*key));
    }
  }
  if (rc > 0 && auth.authenticated()) {
    return {};
  }
  auto where = target.describe();
  if (rc == LIBSSH2_ERROR_TIMEOUT) {
    return std::unexpected(ConnectFailure{Error(fmt::format("{}: timed out after {} authenticating as \"{}\"", where,
                                                            util::format_duration(target.connect_timeout), target.user),
                                                ErrorKind::timed_out)});
  }
  if (rc < 0) {
    return std::unexpected(ConnectFailure{Error(fmt::format("{}: connection lost while authenticating as \"{}\": {}",
                                                            where, target.user, last_error_message(session)))});
  }
  if (!configured && !any_default_key) {
    auth.tried.push_back("no default key (~/.ssh/id_ed25519, id_ecdsa, id_rsa)");
  }
  return std::unexpected(ConnectFailure{Error(fmt::format("{}: public key authentication as \"{}\" failed; tried {}",
                                                          where, target.user, util::join(auth.tried, ", "))),
                                        Retry::no});
}

} // namespace specctl::remote::ssh
