#pragma once

// Private to src/experiment: an SSH host's connection as the experiment and
// the user's ~/.ssh/config describe it, jump hosts included.

#include <specctl/experiment/experiment.hpp>
#include <specctl/util/yaml_field.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace specctl::experiment::detail {

// The keys an SSH host takes besides the common ones.
inline const std::vector<std::string> k_ssh_host_keys = {"identity", "host_key", "known_hosts", "jump", "transport"};

// Fills an SSH host from its `ssh`, `identity`, `host_key`, `known_hosts` and
// `transport` and from ~/.ssh/config; false after reporting a problem.
bool parse_ssh_host(const util::YamlField& field, HostSpec& spec);

// Once every host is known: each SSH host's `jump:` (names of hosts of this
// experiment, or SSH targets and aliases as ProxyJump takes them).
void resolve_jumps(std::map<std::string, HostSpec>& hosts,
                   const std::vector<std::pair<std::string, util::YamlField>>& ssh_fields);

} // namespace specctl::experiment::detail
