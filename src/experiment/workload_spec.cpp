#include <specctl/experiment/workload_spec.hpp>
#include <specctl/util/bounded_read.hpp>

#include <cerrno>
#include <cstdint>

#include <specctl/util/error.hpp>
#include <specctl/util/text.hpp>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <limits>

namespace specctl::experiment {

namespace {

// Sets `target` from the key when it is there and valid (the field reports a bad value).
void read_int(const util::YamlField& map, const char* key, int& target, std::int64_t min, std::int64_t max) {
  if (auto v = map[key]; v.present()) {
    if (auto n = v.as_int(min, max)) {
      target = static_cast<int>(*n);
    }
  }
}

void read_seed(const util::YamlField& map, std::uint64_t& target) {
  if (auto v = map["seed"]; v.present()) {
    if (auto n = v.as_int(0, std::numeric_limits<std::int64_t>::max())) {
      target = static_cast<std::uint64_t>(*n);
    }
  }
}

void read_string(const util::YamlField& map, const char* key, std::string& target) {
  if (auto v = map[key]; v.present()) {
    if (auto s = v.as_string()) {
      target = *s;
    }
  }
}

// The dataset file, relative to the experiment's folder; a missing one is an error here.
std::string read_file(const util::YamlField& map, const std::string& experiment_dir) {
  auto v = map["file"];
  if (!v.present()) {
    map.error("needs file: PATH (the dataset)");
    return {};
  }
  return input_file(v, experiment_dir, "dataset file").value_or("");
}

constexpr std::int64_t k_max_tokens = 1'000'000;
constexpr std::int64_t k_max_prompts = 10'000'000;

bench::ShareGptSpec sharegpt(const util::YamlField& m, const std::string& dir) {
  m.check_keys({"file", "num_prompts", "seed", "min_input", "min_output", "max_input", "max_total", "output_tokens"});
  bench::ShareGptSpec spec;
  spec.file = read_file(m, dir);
  read_int(m, "num_prompts", spec.num_prompts, 1, k_max_prompts);
  read_seed(m, spec.seed);
  read_int(m, "min_input", spec.min_input, 1, k_max_tokens);
  read_int(m, "min_output", spec.min_output, 1, k_max_tokens);
  read_int(m, "max_input", spec.max_input, 1, k_max_tokens);
  read_int(m, "max_total", spec.max_total, 2, k_max_tokens);
  if (auto v = m["output_tokens"]; v.present()) {
    if (auto n = v.as_int(1, k_max_tokens)) {
      spec.fixed_output = static_cast<int>(*n);
    }
  }
  return spec;
}

bench::JsonlSpec jsonl(const util::YamlField& m, const std::string& dir) {
  m.check_keys({"file", "prompt_field", "messages_field", "output_field", "category_field", "id_field", "num_prompts",
                "seed", "shuffle"});
  bench::JsonlSpec spec;
  spec.file = read_file(m, dir);
  read_string(m, "prompt_field", spec.prompt_field);
  read_string(m, "messages_field", spec.messages_field);
  read_string(m, "output_field", spec.output_field);
  read_string(m, "category_field", spec.category_field);
  read_string(m, "id_field", spec.id_field);
  if (auto v = m["num_prompts"]; v.present()) {
    if (auto n = v.as_int(1, k_max_prompts)) {
      spec.num_prompts = static_cast<int>(*n);
    }
  }
  read_seed(m, spec.seed);
  if (auto v = m["shuffle"]; v.present()) {
    if (auto b = v.as_bool()) {
      spec.order = *b ? bench::JsonlSpec::Order::shuffled : bench::JsonlSpec::Order::as_written;
    }
  }
  return spec;
}

bench::RandomSpec random(const util::YamlField& m) {
  m.check_keys({"input_tokens", "output_tokens", "range_ratio", "prefix_tokens", "num_prompts", "seed"});
  bench::RandomSpec spec;
  read_int(m, "input_tokens", spec.input_tokens, 1, k_max_tokens);
  read_int(m, "output_tokens", spec.output_tokens, 1, k_max_tokens);
  if (auto v = m["range_ratio"]; v.present()) {
    if (auto r = v.as_number()) {
      if (*r < 0 || *r >= 1) {
        v.error(fmt::format("range_ratio must be at least 0 and below 1, not {}", *r));
      } else {
        spec.range_ratio = *r;
      }
    }
  }
  read_int(m, "prefix_tokens", spec.prefix_tokens, 0, k_max_tokens);
  read_int(m, "num_prompts", spec.num_prompts, 1, k_max_prompts);
  read_seed(m, spec.seed);
  return spec;
}

bench::SharedPrefixSpec shared_prefix(const util::YamlField& m) {
  m.check_keys({"groups", "per_group", "system_tokens", "question_tokens", "output_tokens", "seed", "order"});
  bench::SharedPrefixSpec spec;
  read_int(m, "groups", spec.groups, 1, k_max_prompts);
  read_int(m, "per_group", spec.per_group, 1, k_max_prompts);
  read_int(m, "system_tokens", spec.system_tokens, 1, k_max_tokens);
  read_int(m, "question_tokens", spec.question_tokens, 1, k_max_tokens);
  read_int(m, "output_tokens", spec.output_tokens, 1, k_max_tokens);
  read_seed(m, spec.seed);
  if (auto v = m["order"]; v.present()) {
    if (auto o = v.as_choice({"shuffled", "grouped"})) {
      spec.order = *o == "grouped" ? bench::SharedPrefixSpec::Order::grouped : bench::SharedPrefixSpec::Order::shuffled;
    }
  }
  return spec;
}

bench::SpecDecSpec specdec(const util::YamlField& m) {
  bench::SpecDecSpec spec;
  if (m.is_scalar()) {
    return spec;
  }
  m.check_keys({"categories", "num_prompts", "seed"});
  if (auto v = m["categories"]; v.present()) {
    if (auto names = v.as_string_list()) {
      spec.categories = *names;
    }
  }
  if (auto v = m["num_prompts"]; v.present()) {
    if (auto n = v.as_int(1, k_max_prompts)) {
      spec.num_prompts = static_cast<int>(*n);
    }
  }
  read_seed(m, spec.seed);
  return spec;
}

} // namespace

std::optional<std::string> input_file(const util::YamlField& field, const std::string& experiment_dir,
                                      std::string_view what) {
  auto path = field.as_string();
  if (!path) {
    return std::nullopt;
  }
  std::filesystem::path resolved = std::filesystem::path(*path).is_absolute()
                                       ? std::filesystem::path(*path)
                                       : std::filesystem::path(experiment_dir) / *path;
  // The size is checked where the file is read, against its own kind's cap.
  if (auto ok = util::check_regular_file(resolved, UINT64_MAX, std::string(what)); !ok) {
    field.error(ok.error().error == ENOENT ? fmt::format("{} \"{}\" does not exist", what, resolved.string())
                                           : fmt::format("{} \"{}\": {}", what, resolved.string(), ok.error().reason));
  }
  return resolved.lexically_normal().string();
}

const std::vector<std::string>& workload_source_names() {
  static const std::vector<std::string> names = {"sharegpt", "jsonl", "random", "shared_prefix", "specdec"};
  return names;
}

std::optional<bench::WorkloadSpec> parse_workload(const util::YamlField& source, const std::string& name,
                                                  const std::string& experiment_dir,
                                                  std::shared_ptr<const bench::Workload>* made) {
  if (name != "specdec" && !source.expect_map()) {
    return std::nullopt;
  }
  const std::size_t errors_before = source.diagnostics().error_count();
  std::optional<bench::WorkloadSpec> spec;
  if (name == "sharegpt") {
    spec = sharegpt(source, experiment_dir);
  } else if (name == "jsonl") {
    spec = jsonl(source, experiment_dir);
  } else if (name == "random") {
    spec = random(source);
  } else if (name == "shared_prefix") {
    spec = shared_prefix(source);
  } else if (name == "specdec") {
    spec = specdec(source);
  }
  if (!spec || source.diagnostics().error_count() != errors_before) {
    return std::nullopt;
  }
  // The source is read now, so a dataset that is not its format, too small or empty
  // after filtering stops `validate` and `run` before anything launches.
  auto workload = bench::make_workload(*spec);
  if (!workload) {
    source.error(workload.error().what());
    return std::nullopt;
  }
  if (made != nullptr) {
    *made = std::make_shared<const bench::Workload>(std::move(*workload));
  }
  return spec;
}

bench::WorkloadSpec parse_workload_text(const std::string& text, const std::string& base_dir) {
  const std::string file = "--dataset";
  util::Diagnostics diag;
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}: not YAML: {}", file, e.msg), ErrorKind::bad_input);
  }
  util::YamlField field(node, "", file, diag);
  std::optional<bench::WorkloadSpec> spec;
  const auto& names = workload_source_names();
  if (field.is_scalar() && field.as_string() == "specdec") {
    spec = parse_workload(field, "specdec", base_dir);
  } else if (field.is_map() && node.size() == 1) {
    const std::string name = node.begin()->first.as<std::string>();
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      field.error(fmt::format("unknown dataset \"{}\"{} (sources: {})", name, util::did_you_mean(name, names),
                              util::join(names, ", ")));
    } else {
      spec = parse_workload(field[name], name, base_dir);
    }
  } else {
    field.error("give one source: specdec, or {sharegpt: {...}}, {jsonl: {...}}, {random: {...}}, "
                "{shared_prefix: {...}} or {specdec: {...}}");
  }
  if (!spec || diag.has_errors()) {
    std::string message;
    for (const auto& d : diag.errors()) {
      message += (message.empty() ? "" : "\n") + d.str();
    }
    throw Error(message.empty() ? file + ": not a dataset" : message, ErrorKind::bad_input);
  }
  return *spec;
}

bool exact_lengths(const bench::WorkloadSpec& spec) {
  return std::holds_alternative<bench::RandomSpec>(spec) || std::holds_alternative<bench::SharedPrefixSpec>(spec);
}

} // namespace specctl::experiment
