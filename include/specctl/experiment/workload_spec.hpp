#pragma once

// The workload sources of a benchmark's `prompts:` (and `specctl bench --dataset`):
// {sharegpt: {...}}, {jsonl: {...}}, {random: {...}}, {shared_prefix: {...}}, specdec
// or {specdec: {...}}, read into bench's WorkloadSpec. docs/experiment-file.md lists the keys.

#include <specctl/bench/workload.hpp>
#include <specctl/util/yaml_field.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::experiment {

// A file the experiment names (`what`: "prompt file", "dataset file"), relative to
// experiment_dir, normalised; one that is not a regular file is an error at the field.
// nullopt when the field is not a string.
std::optional<std::string> input_file(const util::YamlField& field, const std::string& experiment_dir,
                                      std::string_view what);

// sharegpt, jsonl, random, shared_prefix, specdec.
const std::vector<std::string>& workload_source_names();

// `source` is the value under the source's name (for specdec it may be the scalar
// itself). Dataset paths are relative to experiment_dir. The workload is made once
// here, so a dataset that is missing, not its format, empty after filtering or smaller
// than num_prompts is an error at `source` before anything launches. Errors go to the
// field's diagnostics; nullopt after any.
// `made`, when given, receives the workload made: a run sends exactly these requests
// without reading the dataset again.
std::optional<bench::WorkloadSpec> parse_workload(const util::YamlField& source, const std::string& name,
                                                  const std::string& experiment_dir,
                                                  std::shared_ptr<const bench::Workload>* made = nullptr);

// `specctl bench --dataset TEXT`: the same sources written as YAML on one line
// ("specdec", "{random: {input_tokens: 512}}"), paths relative to base_dir. Throws
// specctl::Error (bad_input) with every problem, "--dataset:1:12: message", one a line.
bench::WorkloadSpec parse_workload_text(const std::string& text, const std::string& base_dir);

// Random and shared-prefix prompts are distinct by construction and have exact
// lengths: no unique prefix is added to them unless the benchmark asks for one.
bool exact_lengths(const bench::WorkloadSpec& spec);

} // namespace specctl::experiment
