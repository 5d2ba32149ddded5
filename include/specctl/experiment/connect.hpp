#pragma once

#include <specctl/experiment/experiment.hpp>
#include <specctl/remote/host.hpp>

#include <expected>
#include <memory>

namespace specctl::experiment {

// Opens the host an experiment names: this machine, or an SSH connection
// (key, known_hosts policy and ~/.ssh/config already applied to the spec).
std::expected<std::unique_ptr<remote::Host>, Error> connect_host(const HostSpec& spec);

} // namespace specctl::experiment
