#pragma once

// Private to src/experiment: server settings as written in one place (the
// `server` block, a variant, a matrix point), flattened to dotted keys so that
// layering is a plain overwrite ("knobs.tp", "health.timeout", "args").

#include <specctl/experiment/experiment.hpp>
#include <specctl/util/yaml_field.hpp>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace specctl::experiment::detail {

struct LayerEntry {
  util::YamlField value;
  // Where the key was written: unknown-knob errors point here.
  util::Location key_at;
};

using Layer = std::map<std::string, LayerEntry>;

// Keys a `server` block (and a variant) may set.
const std::vector<std::string>& server_keys();

// Adds the server keys of `block` to `layer`; other keys are left to the caller's check_keys.
void flatten_server_block(const util::YamlField& block, Layer& layer);

// Later layers win; a null value removes the key (a variant can unset a default knob).
Layer merge_layers(const std::vector<const Layer*>& layers);

struct ResolveContext {
  const std::map<std::string, HostSpec>* hosts = nullptr;
  std::vector<std::string> template_search_path;
  // Templates already loaded, by name: each is read and checked once.
  std::map<std::string, std::shared_ptr<const server::ServerTemplate>>* template_cache = nullptr;
  util::Diagnostics* diag = nullptr;
  // The `server` block is not a map: its settings are unknown, so missing ones are not reported again.
  bool server_block_broken = false;
};

// The template `field` names, read and checked once per name; nullptr after reporting a problem.
std::shared_ptr<const server::ServerTemplate> find_template(const util::YamlField& field, const ResolveContext& ctx);

// Turns a merged layer into a checked server configuration. `owner` names the
// variant in messages about missing settings.
ServerConfig resolve_server(const Layer& layer, const ResolveContext& ctx, const util::Location& owner_at,
                            const std::string& owner);

// A numeric knob's limits as messages quote them: "1..64", ">= 1", "<= 8".
std::string knob_limits(const server::KnobDef& def);

// Checks and types one knob value against its definition; nullopt after reporting a problem.
std::optional<nlohmann::json> type_knob(const server::KnobDef& def, const util::YamlField& value);

std::map<std::string, HostSpec> parse_hosts(const util::YamlField& hosts);
// One entry of `benchmarks:` (or a tuning's load written as one).
BenchmarkSpec parse_benchmark(const util::YamlField& field, const std::string& experiment_dir);
std::vector<BenchmarkSpec> parse_benchmarks(const util::YamlField& benchmarks, const std::string& experiment_dir);
// An `slo:` map (a benchmark's, a tuning's): level latency -> upper bound in ms, in the
// order written. The names must be latencies `load` measures (the `_ms` metrics of
// metrics_of); without a load any name passes. Mistakes are reported and skipped.
std::vector<std::pair<std::string, double>> parse_slo(const util::YamlField& slo, const BenchmarkSpec* load);
// A rate benchmark's `bisect:`, which needs an SLO given (as the benchmark's slo, or a
// tuning's for its load).
void parse_bisect(const util::YamlField& bisect, BenchmarkSpec& spec, bool slo_given);
// A benchmark's bound by default: its size at a pessimistic speed (2 tok/s per stream).
util::Duration default_timeout(const BenchmarkSpec& spec);
// Once the variants are known: each concurrency and rate benchmark's effective
// repeats (3 without `repeats:` when there is a verdict to reach, else 1), and
// its default timeout for them.
void resolve_repeats(Experiment& experiment);
// The experiment's `bench:` block: defaults for every built-in benchmark (`client`).
void parse_bench_defaults(const util::YamlField& field, Experiment& experiment);

// A knob's value in a variant name: "steps3", "fusion-on", "attn-fa3" (short, readable,
// safe in file names), by the knob's short name in the template where it has one.
std::string knob_label(const std::string& knob, const std::string& value, const server::ServerTemplate* tmpl);

// The `tune:` block of a tuning file: its TuneSpec, and a variant for each configuration of its space.
void parse_tune(const util::YamlField& top, const Layer& defaults, const ResolveContext& ctx,
                const std::string& experiment_dir, Experiment& experiment);

} // namespace specctl::experiment::detail
