#pragma once

// The figures a command benchmark printed: regexes and JSON paths over its output.

#include <specctl/experiment/experiment.hpp>

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::run {

// Finds each metric in a command's standard output. A regex metric is group 1
// of the first match; a JSON metric is a path (results.throughput,
// runs[0].tok_s) into the output when it is JSON as a whole, otherwise into the
// last JSON object that starts a line with "{" and ends on that line (JSON
// lines after log noise) or at the next line that is a lone "}"
// (pretty-printed after noise). Numbers may carry thousands commas
// ("1,234.5"); JSON strings holding a number count. A metric that is missing
// or not a finite number is left out and described in `problems`; nothing
// throws.
std::map<std::string, double> extract_metrics(const std::vector<experiment::MetricExtractor>& extractors,
                                              std::string_view stdout_text, std::vector<std::string>& problems);

} // namespace specctl::run
