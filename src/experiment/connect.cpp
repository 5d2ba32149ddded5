#include <specctl/experiment/connect.hpp>

#include <specctl/remote/local_host.hpp>
#include <specctl/remote/ssh_host.hpp>

#include <fmt/format.h>

namespace specctl::experiment {

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
  remote::SshTarget target;
  target.name = spec.name;
  target.user = spec.user;
  target.hostname = spec.hostname;
  target.port = spec.port;
  target.identity = spec.identity;
  target.known_hosts = spec.known_hosts;
  target.host_key_policy =
      spec.host_key == HostKeyPolicy::strict ? remote::HostKeyPolicy::strict : remote::HostKeyPolicy::accept_new;
  auto host = remote::connect_ssh(target);
  if (!host) {
    return std::unexpected(host.error());
  }
  return std::unique_ptr<remote::Host>(std::move(*host));
}

} // namespace specctl::experiment
