#pragma once

// Private to src/server: the template's `accept_length:` list.

#include <specctl/server/accept_source.hpp>
#include <specctl/util/yaml_field.hpp>

#include <string>
#include <vector>

namespace specctl::server::detail {

// Reads `accept_length: [{prometheus: {...}}, {log: {...}}, {responses: {}}]`;
// log metrics must be among `metric_names` (the template's log.metrics).
std::vector<AcceptSource> parse_accept_sources(const util::YamlField& field,
                                               const std::vector<std::string>& metric_names);

} // namespace specctl::server::detail
