#include <specctl/experiment/connect.hpp>

#include <specctl/remote/local_host.hpp>
#include <specctl/remote/openssh_host.hpp>
#include <specctl/remote/ssh_host.hpp>

#include <atomic>
#include <cstdlib>
#include <filesystem>

#include <unistd.h>

#include <fmt/format.h>

namespace specctl::experiment {

namespace {

// A master of this process's own per host it connects: another specctl run
// against the same node never shares it, so closing one never cuts the other.
// ~/.specctl/ssh/PID-N, or under /tmp when that is too long for a socket path
// (ssh's own socket name adds 41 to it, and it must stay under 90 bytes).
std::string control_dir() {
  static std::atomic<int> serial{0};
  const char* home = std::getenv("HOME");
  std::string base = std::string(home != nullptr && *home != '\0' ? home : "/tmp") + "/.specctl/ssh";
  auto name = fmt::format("{}-{}", ::getpid(), ++serial);
  if (base.size() + 1 + name.size() + 41 > 90) {
    base = fmt::format("/tmp/specctl-ssh-{}", ::getuid());
  }
  return base + "/" + name;
}

} // namespace

remote::SshTarget ssh_target(const HostSpec& spec) {
  remote::SshTarget target;
  target.name = spec.name;
  target.user = spec.user;
  target.hostname = spec.hostname;
  target.port = spec.port;
  target.identities = spec.identities;
  target.identities_only = spec.identities_only;
  target.known_hosts = spec.known_hosts;
  target.host_key_policy =
      spec.host_key == HostKeyPolicy::strict ? remote::HostKeyPolicy::strict : remote::HostKeyPolicy::accept_new;
  target.host_key_alias = spec.host_key_alias;
  target.proxy_command = spec.proxy_command;
  if (spec.connect_timeout && *spec.connect_timeout > util::Duration::zero()) {
    target.connect_timeout = *spec.connect_timeout;
  }
  if (spec.keepalive) {
    target.keepalive = *spec.keepalive;
  }
  if (spec.keepalive_count && *spec.keepalive_count > 0) {
    target.keepalive_count = *spec.keepalive_count;
  }
  for (const auto& hop : spec.jumps) {
    target.jumps.push_back(ssh_target(hop));
  }
  return target;
}

namespace {

// A host's settings for the system ssh, without the master's control folder
// (a hop has none: its ssh is a ProxyCommand's `ssh -W`).
remote::OpenSshTarget openssh_settings(const HostSpec& spec) {
  remote::OpenSshTarget target;
  target.name = spec.name;
  target.destination = spec.destination.empty() ? spec.hostname : spec.destination;
  target.user = spec.given_user;
  target.port = spec.given_port;
  // The settings as resolved (the experiment's over the config's, which ssh
  // reads again anyway); the rest is the user's ssh config's to say.
  target.identities = spec.identities;
  if (spec.known_hosts != HostSpec{}.known_hosts) {
    target.known_hosts = spec.known_hosts;
  }
  target.strict_host_key_checking = spec.host_key == HostKeyPolicy::strict ? "yes" : "accept-new";
  // The experiment's `jump:` only: a ProxyJump or ProxyCommand of the ssh
  // config is ssh's own to follow, as it reads it.
  if (!spec.given_jumps.empty()) {
    for (const auto& hop : spec.jumps) {
      target.jumps.push_back(openssh_settings(hop));
    }
  }
  if (const char* config = std::getenv("SPECCTL_SSH_CONFIG"); config != nullptr && *config != '\0') {
    // The config specctl reads is the one ssh reads; a missing one is an empty one to both.
    std::error_code ec;
    target.config_file = std::filesystem::exists(config, ec) ? std::string(config) : std::string("/dev/null");
  }
  if (spec.connect_timeout && *spec.connect_timeout > util::Duration::zero()) {
    target.connect_timeout = *spec.connect_timeout;
  }
  if (spec.keepalive) {
    target.keepalive = *spec.keepalive;
  }
  return target;
}

} // namespace

remote::OpenSshTarget openssh_target(const HostSpec& spec) {
  auto target = openssh_settings(spec);
  target.control_dir = control_dir();
  return target;
}

std::expected<std::unique_ptr<remote::Host>, Error> connect_host(const HostSpec& spec) {
  if (spec.kind == HostKind::local) {
    return std::make_unique<remote::LocalHost>();
  }
  if (spec.kind == HostKind::pool) {
    return std::unexpected(
        Error(fmt::format("\"{}\" is a pool: connect to one of its hosts", spec.name), ErrorKind::bad_input));
  }
  if (spec.kind == HostKind::slurm) {
    return std::unexpected(Error(
        fmt::format("\"{}\" is a Slurm cluster: its variants run as batch jobs, not over a connection", spec.name),
        ErrorKind::bad_input));
  }
  if (spec.transport == SshTransport::openssh) {
    return remote::connect_openssh(openssh_target(spec));
  }
  auto target = ssh_target(spec);
  auto host = remote::connect_ssh(target);
  if (!host) {
    return std::unexpected(host.error());
  }
  return std::unique_ptr<remote::Host>(std::move(*host));
}

} // namespace specctl::experiment
