#include "layer.hpp"
#include <specctl/bench/prompts.hpp>
#include <specctl/experiment/workload_spec.hpp>

#include <specctl/util/text.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <regex>
#include <set>

namespace specctl::experiment::detail {

using namespace std::chrono_literals;

namespace {

// Timeouts by default assume a slow server: 2 tokens/s per stream. Generous on
// purpose; a benchmark that needs longer sets `timeout`.
constexpr double k_floor_tok_s_per_stream = 2.0;
constexpr util::Duration k_command_timeout = 30min;
constexpr util::Duration k_min_benchmark_timeout = 1min;
constexpr int k_max_repeats = 1000;
// Without `repeats:`, an experiment that compares variants measures each level this often.
constexpr int k_verdict_repeats = 3;
// The most rates a benchmark's SLO search measures after its listed ones.
constexpr int k_max_bisect = 10;

const std::vector<std::string> k_kinds = {"single_stream", "concurrency", "rate", "command"};
const std::vector<std::string> k_common_keys = {"name",         "kind",     "max_tokens",    "prompts",
                                                "warmup",       "endpoint", "ignore_eos",    "timeout",
                                                "idle_timeout", "client",   "unique_prompts"};
const std::vector<std::string> k_client_places = {"host", "local"};
const std::vector<std::string> k_placeholders = {"url", "port", "variant", "model", "host"};

std::vector<std::string> keys_for(const std::string& kind) {
  std::vector<std::string> keys = k_common_keys;
  // "slo" and "bisect" are known to every built-in kind, so that a kind they do
  // not apply to is told why rather than that the key is unknown.
  if (kind == "single_stream") {
    keys.insert(keys.end(), {"runs", "slo", "bisect"});
  } else if (kind == "concurrency") {
    keys.insert(keys.end(), {"levels", "requests", "repeats", "slo", "bisect"});
  } else if (kind == "rate") {
    keys.insert(keys.end(), {"rates", "duration", "max_concurrency", "burstiness", "repeats", "slo", "bisect"});
  } else if (kind == "command") {
    keys = {"name", "kind", "run", "on", "parse", "metric", "json", "timeout"};
  }
  return keys;
}

void parse_prompts(const util::YamlField& field, const std::string& experiment_dir, PromptSpec& prompts) {
  if (field.is_scalar()) {
    auto name = field.as_choice({"seeds", "long", "specdec"});
    if (name && *name == "specdec") {
      prompts.workload = parse_workload(field, *name, experiment_dir, &prompts.loaded);
      prompts.builtin.clear();
    } else if (name) {
      prompts.builtin = *name;
    }
    return;
  }
  if (field.is_list()) {
    auto texts = field.as_string_list();
    if (texts && texts->empty()) {
      field.error("the list of prompts is empty");
    }
    if (texts) {
      prompts.inline_prompts = *texts;
      prompts.builtin.clear();
    }
    return;
  }
  if (!field.expect_map()) {
    return;
  }
  for (const auto& name : workload_source_names()) {
    if (auto source = field[name]; source.present()) {
      field.check_keys({name});
      prompts.workload = parse_workload(source, name, experiment_dir, &prompts.loaded);
      prompts.builtin.clear();
      return;
    }
  }
  field.check_keys({"file", "input_tokens", "sharegpt", "jsonl", "random", "shared_prefix", "specdec"});
  if (field["file"].present() == field["input_tokens"].present()) {
    field.error("give prompts as seeds, long, specdec, a list, {file: PATH}, {input_tokens: N}, or one of "
                "{sharegpt: ...}, {jsonl: ...}, {random: ...}, {shared_prefix: ...}, {specdec: ...}");
    return;
  }
  prompts.builtin.clear();
  if (auto file = field["file"]; file.present()) {
    prompts.file = input_file(file, experiment_dir, "prompt file");
    // Read now: an empty or unreadable prompt file stops `validate`, not every variant's warmup.
    std::error_code ec;
    if (prompts.file && std::filesystem::is_regular_file(*prompts.file, ec)) {
      bench::PromptSource source;
      source.kind = bench::PromptKind::file;
      source.path = *prompts.file;
      if (auto read = bench::load_prompts(source); !read) {
        file.error(read.error().what());
      }
    }
  } else {
    prompts.synthetic_input_tokens = static_cast<int>(field["input_tokens"].as_int(1, 1'000'000).value_or(1));
  }
}

// Placeholders in a command benchmark must be ones specctl fills in.
void check_placeholders(const util::YamlField& field, const std::string& run) {
  for (std::size_t i = 0; i < run.size(); ++i) {
    if (run[i] == '{' && i + 1 < run.size() && run[i + 1] == '{') {
      ++i;
      continue;
    }
    if (run[i] != '{') {
      continue;
    }
    auto end = run.find('}', i);
    if (end == std::string::npos) {
      field.error("unclosed \"{\" in the command (write {{ for a literal brace)");
      return;
    }
    std::string name = run.substr(i + 1, end - i - 1);
    if (std::find(k_placeholders.begin(), k_placeholders.end(), name) == k_placeholders.end()) {
      field.error(
          fmt::format("unknown placeholder \"{{{}}}\"{}; known: {{url}}, {{port}}, {{variant}}, {{model}}, {{host}}",
                      name, util::did_you_mean(name, k_placeholders)));
    }
    i = end;
  }
}

void add_regex(const util::YamlField& field, const std::string& metric, BenchmarkSpec& spec) {
  auto pattern = field.as_string();
  if (!pattern) {
    return;
  }
  try {
    std::regex compiled(*pattern, std::regex::ECMAScript);
    if (compiled.mark_count() < 1) {
      field.error(fmt::format("the pattern \"{}\" needs a group ( ) around the number", *pattern));
      return;
    }
  } catch (const std::regex_error& e) {
    field.error(fmt::format("invalid regular expression \"{}\": {}", *pattern, e.what()));
    return;
  }
  spec.extract.push_back({metric, ExtractKind::regex, *pattern});
}

void parse_command(const util::YamlField& field, BenchmarkSpec& spec) {
  if (auto run = field["run"]; run.present()) {
    spec.run = run.as_string().value_or("");
    check_placeholders(run, spec.run);
  } else {
    field.error("a command benchmark needs \"run\"");
  }
  if (auto on = field["on"]; on.present()) {
    spec.run_on =
        on.as_choice({"local", "host"}).value_or("local") == "host" ? CommandWhere::host : CommandWhere::local;
  }
  auto parse = field["parse"];
  auto json = field["json"];
  if (parse.present() && parse.is_map()) {
    if (field["metric"].present()) {
      field["metric"].error("\"metric\" names the value of a single parse pattern; parse is a map here");
    }
    parse.check_duplicates();
    for (const auto& [metric, metric_at, pattern] : parse.entries()) {
      add_regex(pattern, metric, spec);
    }
  } else if (parse.present()) {
    std::string metric = field["metric"].present() ? field["metric"].as_string().value_or("value") : "value";
    add_regex(parse, metric, spec);
  }
  if (json.present() && json.expect_map()) {
    json.check_duplicates();
    static const std::regex k_path(R"(^[A-Za-z0-9_]+(\[[0-9]+\])*(\.[A-Za-z0-9_]+(\[[0-9]+\])*)*$)");
    for (const auto& [metric, metric_at, path] : json.entries()) {
      auto text = path.as_string();
      if (text && !std::regex_match(*text, k_path)) {
        path.error(fmt::format("\"{}\" is not a JSON path (write it like results.throughput or runs[0].tok_s)", *text));
      } else if (text) {
        spec.extract.push_back({metric, ExtractKind::json, *text});
      }
    }
  }
  if (!parse.present() && !json.present()) {
    field.error("a command benchmark needs \"parse\" (a regex) or \"json\" (paths) to find its numbers");
  }
}

// `slo:` and `bisect:` of a benchmark, once its kind and levels are known.
void parse_slo_keys(const util::YamlField& field, BenchmarkSpec& spec) {
  auto slo = field["slo"];
  auto bisect = field["bisect"];
  if (slo.present()) {
    if (spec.kind == BenchmarkKind::concurrency || spec.kind == BenchmarkKind::rate) {
      spec.slo = parse_slo(slo, &spec);
    } else {
      slo.error(fmt::format("an SLO judges the levels of a concurrency or rate benchmark; a {} benchmark has none",
                            kind_name(spec.kind)));
    }
  }
  parse_bisect(bisect, spec, slo.present());
}

} // namespace

void parse_bisect(const util::YamlField& bisect, BenchmarkSpec& spec, bool slo_given) {
  if (!bisect.present()) {
    return;
  }
  if (spec.kind != BenchmarkKind::rate) {
    bisect.error(fmt::format("bisect searches request rates: it needs a rate benchmark, not {}", kind_name(spec.kind)));
    return;
  }
  if (!slo_given) {
    bisect.error("bisect searches for the highest rate that meets the SLO: give the benchmark an slo, e.g. "
                 "slo: {ttft_p99_ms: 2000}");
    return;
  }
  spec.bisect = static_cast<int>(bisect.as_int(1, k_max_bisect).value_or(0));
}

std::vector<std::pair<std::string, double>> parse_slo(const util::YamlField& slo, const BenchmarkSpec* load) {
  std::vector<std::pair<std::string, double>> out;
  if (!slo.present() || !slo.expect_map()) {
    return out;
  }
  slo.check_duplicates();
  std::vector<std::string> bounds;
  if (load != nullptr) {
    for (const auto& metric : metrics_of(*load)) {
      if (metric.ends_with("_ms")) {
        bounds.push_back(metric);
      }
    }
  }
  for (const auto& [metric, key_at, value] : slo.entries()) {
    if (load != nullptr && std::find(bounds.begin(), bounds.end(), metric) == bounds.end()) {
      slo.diagnostics().error(key_at,
                              fmt::format("{}: \"{}\" is not a latency of the load{}; it has {}", slo.path(), metric,
                                          util::did_you_mean(metric, bounds), util::join(bounds, ", ")));
      continue;
    }
    if (auto bound = value.as_number()) {
      if (!(*bound > 0)) {
        value.error("an SLO bound is a positive number of milliseconds");
        continue;
      }
      out.emplace_back(metric, *bound);
    }
  }
  return out;
}

util::Duration default_timeout(const BenchmarkSpec& spec) {
  double seconds_per_request = spec.prompts.longest_output(spec.max_tokens) / k_floor_tok_s_per_stream;
  double total = 0;
  switch (spec.kind) {
  case BenchmarkKind::single_stream:
    total = (spec.runs + spec.warmup) * seconds_per_request;
    break;
  case BenchmarkKind::concurrency:
    for (int level : spec.levels) {
      double rounds = std::ceil(static_cast<double>(spec.requests_at(level)) / level);
      total += (rounds + (spec.warmup > 0 ? 1 : 0)) * seconds_per_request;
    }
    break;
  case BenchmarkKind::rate:
    // The SLO search's rates run after the listed ones, each as often as they.
    total = static_cast<double>(spec.rates.size() + static_cast<std::size_t>(spec.bisect)) *
            (std::chrono::duration<double>(spec.duration).count() + seconds_per_request);
    break;
  case BenchmarkKind::command:
    return k_command_timeout;
  }
  // Every repeat measures every level again.
  total *= std::max(spec.repeats, 1);
  auto timeout = util::Duration(static_cast<util::Duration::rep>(total * 1000));
  return std::max(timeout, k_min_benchmark_timeout);
}

BenchmarkSpec parse_benchmark(const util::YamlField& field, const std::string& experiment_dir) {
  BenchmarkSpec spec;
  spec.where = field.location();
  if (!field.expect_map()) {
    return spec;
  }
  std::string kind = "single_stream";
  if (auto k = field["kind"]; k.present()) {
    auto parsed = k.as_choice(k_kinds);
    if (!parsed) {
      return spec;
    }
    kind = *parsed;
  } else {
    field.error("missing \"kind\" (single_stream, concurrency, rate or command)");
    return spec;
  }
  spec.kind = kind == "concurrency" ? BenchmarkKind::concurrency
              : kind == "rate"      ? BenchmarkKind::rate
              : kind == "command"   ? BenchmarkKind::command
                                    : BenchmarkKind::single_stream;
  field.check_keys(keys_for(kind));
  if (auto name = field["name"]; name.present()) {
    spec.name = name.as_string().value_or("");
    if (!util::path_safe_name(spec.name)) {
      name.error(fmt::format("benchmark names are used in file names: letters, digits, '.', '_' and '-', not only "
                             "dots, at most 128 characters; got \"{}\"",
                             spec.name));
    }
  } else {
    spec.name = kind;
  }
  if (auto v = field["max_tokens"]; v.present()) {
    spec.max_tokens = static_cast<int>(v.as_int(1, 1'000'000).value_or(spec.max_tokens));
  }
  if (auto v = field["warmup"]; v.present()) {
    spec.warmup = static_cast<int>(v.as_int(0, 1000).value_or(spec.warmup));
  }
  if (auto v = field["ignore_eos"]; v.present()) {
    spec.ignore_eos = v.as_bool().value_or(true);
  }
  if (auto v = field["unique_prompts"]; v.present()) {
    spec.unique_prompts = v.as_bool().value_or(true);
  }
  if (auto v = field["repeats"]; v.present()) {
    spec.repeats_written = static_cast<int>(v.as_int(1, k_max_repeats).value_or(1));
    spec.repeats = *spec.repeats_written;
  }
  if (auto v = field["endpoint"]; v.present()) {
    spec.endpoint =
        v.as_choice({"completions", "chat"}).value_or("completions") == "chat" ? Endpoint::chat : Endpoint::completions;
  }
  if (auto v = field["prompts"]; v.present()) {
    parse_prompts(v, experiment_dir, spec.prompts);
  }
  if (spec.prompts.chat() && spec.endpoint != Endpoint::chat) {
    field["prompts"].error("the dataset holds chats (messages): they need endpoint: chat");
  }
  if (spec.prompts.workload && exact_lengths(*spec.prompts.workload) && !field["unique_prompts"].present()) {
    spec.unique_prompts = false;
  }

  if (auto v = field["client"]; v.present()) {
    if (auto place = v.as_choice(k_client_places)) {
      spec.client = *place == "local" ? ClientWhere::local : ClientWhere::host;
    }
  }
  if (auto v = field["runs"]; v.present()) {
    spec.runs = static_cast<int>(v.as_int(1, 100'000).value_or(spec.runs));
  }
  if (spec.kind == BenchmarkKind::concurrency) {
    auto levels = field["levels"];
    if (!levels.present()) {
      field.error("a concurrency benchmark needs \"levels\", e.g. [1, 2, 5, 10, 30, 70, 100, 250]");
    } else if (levels.expect_list()) {
      for (const auto& item : levels.items()) {
        if (auto level = item.as_int(1, 100'000)) {
          if (std::find(spec.levels.begin(), spec.levels.end(), *level) != spec.levels.end()) {
            item.error(fmt::format("level {} is listed twice", *level));
          }
          spec.levels.push_back(static_cast<int>(*level));
        }
      }
      if (levels.items().empty()) {
        levels.error("the list of concurrency levels is empty");
      }
    }
    if (auto v = field["requests"]; v.present()) {
      spec.requests = static_cast<int>(v.as_int(1, 10'000'000).value_or(1));
    }
  }
  if (spec.kind == BenchmarkKind::rate) {
    auto rates = field["rates"];
    if (!rates.present()) {
      field.error("a rate benchmark needs \"rates\" (requests per second), e.g. [1, 2, 4]");
    } else if (rates.expect_list()) {
      for (const auto& item : rates.items()) {
        if (auto rate = item.as_number()) {
          if (*rate <= 0) {
            item.error("a request rate must be above zero");
          }
          spec.rates.push_back(*rate);
        }
      }
      if (rates.items().empty()) {
        rates.error("the list of request rates is empty");
      }
    }
    if (auto v = field["duration"]; v.present()) {
      spec.duration = v.as_duration().value_or(spec.duration);
    }
    if (auto v = field["max_concurrency"]; v.present()) {
      spec.max_concurrency = static_cast<int>(v.as_int(1, 100'000).value_or(1));
    }
    if (auto v = field["burstiness"]; v.present()) {
      spec.burstiness = v.as_number().value_or(1.0);
      if (spec.burstiness <= 0) {
        v.error("burstiness must be above zero (1 is Poisson)");
      }
    }
  }
  if (spec.kind == BenchmarkKind::command) {
    parse_command(field, spec);
  } else {
    parse_slo_keys(field, spec);
  }
  spec.timeout = default_timeout(spec);
  if (auto v = field["timeout"]; v.present()) {
    spec.timeout = v.as_duration().value_or(spec.timeout);
    spec.timeout_written = spec.timeout;
  }
  if (auto v = field["idle_timeout"]; v.present()) {
    spec.idle_timeout = v.as_duration().value_or(spec.idle_timeout);
    if (spec.idle_timeout <= util::Duration::zero()) {
      v.error("must be positive");
    }
  }
  return spec;
}

void resolve_repeats(Experiment& experiment) {
  const bool verdict = experiment.variants.size() >= 2;
  for (auto& spec : experiment.benchmarks) {
    if (spec.kind != BenchmarkKind::concurrency && spec.kind != BenchmarkKind::rate) {
      continue;
    }
    spec.repeats = spec.repeats_written.value_or(verdict ? k_verdict_repeats : 1);
    if (!spec.timeout_written) {
      spec.timeout = default_timeout(spec);
    }
  }
}

void parse_bench_defaults(const util::YamlField& field, Experiment& experiment) {
  if (!field.present() || !field.expect_map()) {
    return;
  }
  field.check_keys({"client"});
  if (auto v = field["client"]; v.present()) {
    if (auto place = v.as_choice(k_client_places)) {
      experiment.bench_client = *place == "local" ? ClientWhere::local : ClientWhere::host;
    }
  }
}

std::vector<BenchmarkSpec> parse_benchmarks(const util::YamlField& benchmarks, const std::string& experiment_dir) {
  std::vector<BenchmarkSpec> out;
  if (!benchmarks.present()) {
    benchmarks.error("no benchmarks: add at least one (e.g. {name: single-stream, kind: single_stream})");
    return out;
  }
  if (!benchmarks.expect_list()) {
    return out;
  }
  if (benchmarks.items().empty()) {
    benchmarks.error("the list of benchmarks is empty");
  }
  std::set<std::string> names;
  for (const auto& item : benchmarks.items()) {
    auto spec = parse_benchmark(item, experiment_dir);
    if (!spec.name.empty() && !names.insert(spec.name).second) {
      item.error(fmt::format("duplicate benchmark name \"{}\"", spec.name));
    }
    out.push_back(std::move(spec));
  }
  return out;
}

} // namespace specctl::experiment::detail

namespace specctl::experiment {

std::string_view kind_name(BenchmarkKind kind) {
  return detail::k_kinds.at(static_cast<std::size_t>(kind));
}

} // namespace specctl::experiment
