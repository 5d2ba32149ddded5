#pragma once

#include <specctl/experiment/experiment.hpp>
#include <specctl/remote/host.hpp>
#include <specctl/remote/openssh_host.hpp>
#include <specctl/remote/ssh_host.hpp>

#include <expected>
#include <memory>

namespace specctl::experiment {

// Opens the host an experiment names: this machine, or an SSH connection
// (key, known_hosts policy and ~/.ssh/config already applied to the spec).
std::expected<std::unique_ptr<remote::Host>, Error> connect_host(const HostSpec& spec);

// What each transport is given for an SSH host, its jump hosts included.
remote::SshTarget ssh_target(const HostSpec& spec);
remote::OpenSshTarget openssh_target(const HostSpec& spec);

} // namespace specctl::experiment
