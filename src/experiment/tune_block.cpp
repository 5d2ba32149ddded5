// A tuning file's `tune:` block (issue #19): the space, the load, the SLO, the
// objective and the budget. The space becomes the experiment's variants, one per
// configuration, named and resolved exactly as matrix points are.

#include "layer.hpp"

#include <specctl/util/text.hpp>

#include <algorithm>
#include <array>
#include <fmt/format.h>

namespace specctl::experiment {

namespace {

using detail::Layer;
using detail::LayerEntry;

const std::vector<std::string> k_tune_keys = {"space",  "load",  "slo",         "objective",
                                              "budget", "noise", "speculation", "parallel"};
const std::vector<std::string> k_dimension_keys = {"values", "range", "start", "where"};
// Each objective once: its name in YAML and the level metric it reads.
struct ObjectiveInfo {
  TuneObjective objective;
  std::string_view name;
  std::string_view metric;
};
constexpr std::array<ObjectiveInfo, 4> k_objectives = {{
    {TuneObjective::output_tok_s, "output_tok_s", "output_tok_s"},
    {TuneObjective::per_user_tok_s, "per_user_tok_s", "tpot_p50_ms"},
    {TuneObjective::goodput, "goodput", "goodput_rps"},
    {TuneObjective::tok_per_j, "tok_per_j", "tok_per_j"},
}};

const ObjectiveInfo& objective_info(TuneObjective objective) {
  for (const auto& info : k_objectives) {
    if (info.objective == objective) {
      return info;
    }
  }
  return k_objectives.front();
}
// A range is searched, not swept, but its values are still each a variant.
constexpr std::int64_t k_max_range = 1000;
// The value of a knob that means "not set" (no speculation: `speculative: none`).
constexpr std::string_view k_unset = "none";

std::string scalar_text(const util::YamlField& field) {
  return field.node().IsNull() ? std::string(k_unset) : field.node().Scalar();
}

// One entry of `space:`: a list of values, or {values|range, start, where}.
struct ParsedDimension {
  tune::Dimension dimension;
  util::Location key_at;
  // The start value's field, to point at when it is not one of the values.
  std::optional<util::YamlField> start_field;
  // A range's field, to point at when it goes past the knob's limits.
  std::optional<util::YamlField> range_field;
};

std::optional<ParsedDimension> parse_dimension(const std::string& knob, const util::Location& key_at,
                                               const util::YamlField& value) {
  ParsedDimension out{tune::Dimension{knob, {}, false, "", "", {}}, key_at, std::nullopt, std::nullopt};
  auto add_values = [&](const util::YamlField& list) {
    if (!list.expect_list()) {
      return;
    }
    for (const auto& item : list.items()) {
      if (item.present() && !item.expect_scalar()) {
        continue;
      }
      auto text = scalar_text(item);
      if (std::find(out.dimension.values.begin(), out.dimension.values.end(), text) != out.dimension.values.end()) {
        item.error(fmt::format("\"{}\" is given twice", text));
        continue;
      }
      out.dimension.values.push_back(text);
    }
    if (list.items().empty()) {
      list.error(fmt::format("knob \"{}\" has no values", knob));
    }
  };
  if (value.is_list()) {
    add_values(value);
    return out;
  }
  if (!value.expect_map()) {
    return std::nullopt;
  }
  value.check_keys(k_dimension_keys);
  auto values = value["values"];
  auto range = value["range"];
  if (values.present() == range.present()) {
    value.error(fmt::format("give knob \"{}\" either \"values\" (a list) or \"range\" ([first, last] integers)", knob));
    return std::nullopt;
  }
  if (values.present()) {
    add_values(values);
  } else if (range.expect_list()) {
    auto bounds = range.items();
    if (bounds.size() != 2) {
      range.error("a range is [first, last], e.g. [1, 10]");
      return std::nullopt;
    }
    auto first = bounds[0].as_int(-1'000'000'000, 1'000'000'000);
    auto last = bounds[1].as_int(-1'000'000'000, 1'000'000'000);
    if (!first || !last) {
      return std::nullopt;
    }
    if (*first > *last) {
      range.error(fmt::format("the range [{}, {}] is empty: give the smaller bound first", *first, *last));
      return std::nullopt;
    }
    if (*last - *first + 1 > k_max_range) {
      range.error(fmt::format("the range [{}, {}] has {} values, more than {}", *first, *last, *last - *first + 1,
                              k_max_range));
      return std::nullopt;
    }
    for (auto v = *first; v <= *last; ++v) {
      out.dimension.values.push_back(std::to_string(v));
    }
    out.dimension.ordered = true;
    out.range_field = range;
  }
  if (auto start = value["start"]; start.present() && start.expect_scalar()) {
    out.dimension.start = scalar_text(start);
    out.start_field = start;
  }
  if (auto where = value["where"]; where.present() && where.expect_map()) {
    auto entries = where.entries();
    if (entries.size() != 1) {
      where.error("where names one knob and its values, e.g. where: {speculative: [eagle3]}");
    } else {
      const auto& [other, other_at, wanted] = entries.front();
      out.dimension.where_knob = other;
      if (wanted.is_list()) {
        for (const auto& item : wanted.items()) {
          if (!item.present() || item.expect_scalar()) {
            out.dimension.where_values.push_back(scalar_text(item));
          }
        }
      } else if (!wanted.present() || wanted.expect_scalar()) {
        out.dimension.where_values.push_back(scalar_text(wanted));
      }
    }
  }
  return out;
}

std::vector<ParsedDimension> parse_space(const util::YamlField& space, const Layer& defaults) {
  std::vector<ParsedDimension> out;
  if (!space.present()) {
    space.error(
        "a tuning needs a space: the knobs to tune and their values, e.g. space: {spec_steps: {range: [1, 10]}}");
    return out;
  }
  if (!space.expect_map()) {
    return out;
  }
  space.check_duplicates();
  for (const auto& [knob, key_at, value] : space.entries()) {
    auto parsed = parse_dimension(knob, key_at, value);
    if (!parsed) {
      continue;
    }
    auto& d = parsed->dimension;
    if (d.values.empty()) {
      continue;
    }
    if (!d.where_knob.empty()) {
      auto earlier =
          std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.dimension.knob == d.where_knob; });
      if (earlier == out.end()) {
        value.error(fmt::format("where names \"{}\", which is not a knob of the space written before \"{}\"",
                                d.where_knob, knob));
        continue;
      }
      for (const auto& wanted : d.where_values) {
        const auto& others = earlier->dimension.values;
        if (std::find(others.begin(), others.end(), wanted) == others.end()) {
          value.error(fmt::format("where: \"{}\" is not a value of knob \"{}\" ({})", wanted, d.where_knob,
                                  util::join(others, ", ")));
        }
      }
    }
    if (!d.start.empty()) {
      if (std::find(d.values.begin(), d.values.end(), d.start) == d.values.end()) {
        parsed->start_field->error(
            fmt::format("start \"{}\" is not a value of knob \"{}\" ({})", d.start, knob, util::join(d.values, ", ")));
      }
    } else if (auto set = defaults.find("knobs." + knob);
               set != defaults.end() && set->second.value.present() && set->second.value.is_scalar()) {
      // The search starts from the server block's setting when the space has it.
      auto text = set->second.value.node().Scalar();
      if (std::find(d.values.begin(), d.values.end(), text) != d.values.end()) {
        d.start = text;
      }
    }
    out.push_back(std::move(*parsed));
  }
  if (out.empty() && !space.diagnostics().has_errors()) {
    space.error("the space has no knobs");
  }
  return out;
}

// A range checked against its knob in the template as a whole: one past the knob's limits
// would otherwise be refused once for each value beyond them, by each variant's resolve.
void check_ranges(const std::vector<ParsedDimension>& parsed, const Layer& defaults,
                  const detail::ResolveContext& ctx) {
  auto named = defaults.find("template");
  if (named == defaults.end() || !named->second.value.present()) {
    return;
  }
  auto tmpl = detail::find_template(named->second.value, ctx);
  if (!tmpl) {
    return;
  }
  for (const auto& p : parsed) {
    const auto* def = tmpl->find_knob(p.dimension.knob);
    // An unknown knob is reported by the resolve, once: every variant says the same.
    if (!p.range_field || def == nullptr || p.dimension.values.empty()) {
      continue;
    }
    const auto& values = p.dimension.values;
    if (def->type != server::KnobType::integer && def->type != server::KnobType::number) {
      p.range_field->error(fmt::format("knob \"{}\" of template \"{}\" is not a number: a range is for integer knobs; "
                                       "list its values instead",
                                       def->name, tmpl->name));
      continue;
    }
    const double first = std::stod(values.front());
    const double last = std::stod(values.back());
    if ((def->min && first < *def->min) || (def->max && last > *def->max)) {
      p.range_field->error(fmt::format("the range [{}, {}] goes past the limits of knob \"{}\" in template \"{}\" ({})",
                                       values.front(), values.back(), def->name, tmpl->name,
                                       detail::knob_limits(*def)));
    }
  }
}

// `load:` names the concurrency or rate benchmark whose levels are the load points,
// or is one: {concurrency: [...]} or {rates: [...]} with any settings of a benchmark.
std::string resolve_load(const util::YamlField& load, const util::YamlField& tune, Experiment& experiment,
                         const std::string& experiment_dir) {
  auto loads = [&] {
    std::vector<std::string> names;
    for (const auto& b : experiment.benchmarks) {
      if (b.kind == BenchmarkKind::concurrency || b.kind == BenchmarkKind::rate) {
        names.push_back(b.name);
      }
    }
    return names;
  };
  if (!load.present()) {
    auto names = loads();
    if (names.size() == 1) {
      return names.front();
    }
    tune.error(names.empty() ? "a tuning needs a load: load: {concurrency: [1, 10, 70]}, or a concurrency or rate "
                               "benchmark in benchmarks"
                             : fmt::format("several benchmarks could be the load ({}): name one with load: NAME",
                                           util::join(names, ", ")));
    return "";
  }
  if (load.is_scalar()) {
    auto name = load.as_string().value_or("");
    const auto* bench = experiment.find_benchmark(name);
    if (bench == nullptr) {
      load.error(fmt::format("load \"{}\" names no benchmark{}", name, util::did_you_mean(name, loads())));
      return "";
    }
    if (bench->kind != BenchmarkKind::concurrency && bench->kind != BenchmarkKind::rate) {
      load.error(fmt::format("benchmark \"{}\" is {}: the load is a concurrency or rate benchmark", name,
                             kind_name(bench->kind)));
      return "";
    }
    return name;
  }
  if (!load.expect_map()) {
    return "";
  }
  const bool by_rate = load["rates"].present();
  if (by_rate == load["concurrency"].present()) {
    load.error("give the load either \"concurrency\" (levels) or \"rates\" (requests per second)");
    return "";
  }
  constexpr std::string_view k_name = "load";
  if (experiment.find_benchmark(std::string(k_name)) != nullptr) {
    load.error("the load is added as the benchmark \"load\", but benchmarks already has one by that name: "
               "write load: NAME to use it instead");
    return "";
  }
  // The load written as a benchmark of its own; its fields keep their places in the file.
  YAML::Node bench(YAML::NodeType::Map);
  bench["name"] = std::string(k_name);
  bench["kind"] = by_rate ? "rate" : "concurrency";
  for (const auto& [key, key_at, value] : load.entries()) {
    // `bisect:` needs the SLO, which may be the tuning's: link_slo reads it.
    if (key != "bisect") {
      bench[key == "concurrency" ? "levels" : key] = value.node();
    }
  }
  if (tune["slo"].present() && load["slo"].present()) {
    load["slo"].error("the tuning has an slo already: give the SLO once, in tune.slo");
    return "";
  }
  auto parsed = detail::parse_benchmark(
      util::YamlField(bench, tune.path() + ".load", load.file(), load.diagnostics(), load.location()), experiment_dir);
  experiment.benchmarks.push_back(std::move(parsed));
  return std::string(k_name);
}

// One SLO for the tuning and its load benchmark: the load's levels get goodput_rps,
// and a rate load's `bisect:` has bounds to search against. The load benchmark gets
// tune.slo when it has none, and gives the tuning its own when tune.slo is left out
// (resolve_load refused a load written in the tune block with both).
void link_slo(const util::YamlField& tune, TuneSpec& spec, Experiment& experiment) {
  auto slo = tune["slo"];
  auto bench = std::find_if(experiment.benchmarks.begin(), experiment.benchmarks.end(),
                            [&](const BenchmarkSpec& b) { return !spec.load.empty() && b.name == spec.load; });
  if (bench == experiment.benchmarks.end()) {
    spec.slo = detail::parse_slo(slo, nullptr);
    return;
  }
  spec.slo = detail::parse_slo(slo, &*bench);
  if (auto load = tune["load"]; load.present() && load.is_map()) {
    detail::parse_bisect(load["bisect"], *bench, slo.present() || load["slo"].present());
  }
  if (!slo.present()) {
    spec.slo = bench->slo;
  } else if (bench->slo.empty()) {
    bench->slo = spec.slo;
  } else if (bench->slo != spec.slo) {
    slo.error(
        fmt::format("benchmark \"{}\" has an slo of its own: give the SLO once, there or in tune.slo", bench->name));
  }
}

void parse_budget(const util::YamlField& budget, TuneSpec& spec) {
  if (!budget.present() || !budget.expect_map()) {
    return;
  }
  budget.check_keys({"loads", "time"});
  if (auto loads = budget["loads"]; loads.present()) {
    spec.max_loads = static_cast<int>(loads.as_int(1, 10'000).value_or(spec.max_loads));
  }
  if (auto time = budget["time"]; time.present()) {
    spec.max_time = time.as_duration();
  }
}

} // namespace

std::string_view objective_name(TuneObjective objective) {
  return objective_info(objective).name;
}

std::string_view objective_metric(TuneObjective objective) {
  return objective_info(objective).metric;
}
std::string TuneSpec::trial_of(const tune::Config& config) const {
  auto it = trials.find(config);
  return it == trials.end() ? "" : it->second;
}

int parallel_trials(const Experiment& experiment) {
  if (!experiment.tune) {
    return 1;
  }
  if (experiment.tune->parallel) {
    return *experiment.tune->parallel;
  }
  // Every trial runs where the server's host says; the first stands for all.
  if (experiment.variants.empty()) {
    return 1;
  }
  int width = 0;
  for (const auto& node : hosts_for(experiment, experiment.variants.front())) {
    const auto* machine = machine_of(experiment, node);
    // A Slurm cluster without max_jobs could take the whole grid at once; trials past
    // the first are guesses at what the search will ask, so only as many as asked.
    width += machine != nullptr && machine->kind == HostKind::slurm ? std::max(1, machine->slurm.max_jobs) : 1;
  }
  return std::max(1, width);
}

namespace detail {

void parse_tune(const util::YamlField& top, const Layer& defaults, const ResolveContext& ctx,
                const std::string& experiment_dir, Experiment& experiment) {
  auto field = top["tune"];
  for (const char* key : {"variants", "matrix"}) {
    if (auto other = top[key]; other.present()) {
      other.error(fmt::format("a tuning file makes its variants from tune.space: leave out \"{}\"", key));
    }
  }
  if (!field.expect_map()) {
    return;
  }
  field.check_keys(k_tune_keys);
  TuneSpec spec;
  spec.where = field.location();
  auto parsed = parse_space(field["space"], defaults);
  spec.load = resolve_load(field["load"], field, experiment, experiment_dir);
  link_slo(field, spec, experiment);
  if (auto objective = field["objective"]; objective.present()) {
    std::vector<std::string> names;
    for (const auto& info : k_objectives) {
      names.emplace_back(info.name);
    }
    if (auto name = objective.as_choice(names)) {
      for (const auto& info : k_objectives) {
        if (info.name == *name) {
          spec.objective = info.objective;
        }
      }
      if (spec.objective == TuneObjective::goodput && spec.slo.empty() && !spec.load.empty()) {
        objective.error("goodput counts the requests that meet the SLO: give the tuning one, e.g. "
                        "slo: {ttft_p99_ms: 2000, tpot_p99_ms: 50}");
      }
    }
  }
  parse_budget(field["budget"], spec);
  if (auto parallel = field["parallel"]; parallel.present()) {
    spec.parallel = parallel.as_int(1, 64).transform([](std::int64_t n) { return static_cast<int>(n); });
  }
  if (auto noise = field["noise"]; noise.present()) {
    spec.noise_pct = noise.as_percent().value_or(spec.noise_pct);
    if (spec.noise_pct >= 100) {
      noise.error("noise is a share of a figure: below 100%");
    }
  }
  for (const auto& p : parsed) {
    spec.dimensions.push_back(p.dimension);
  }
  check_ranges(parsed, defaults, ctx);
  if (auto speculation = field["speculation"]; speculation.present()) {
    spec.speculation = speculation.as_string();
    bool known =
        std::any_of(parsed.begin(), parsed.end(), [&](const auto& p) { return p.dimension.knob == spec.speculation; });
    if (spec.speculation && !known) {
      speculation.error(fmt::format("speculation names \"{}\", which is not a knob of the space", *spec.speculation));
    }
  } else if (std::any_of(parsed.begin(), parsed.end(),
                         [](const auto& p) { return p.dimension.knob == "speculative"; })) {
    spec.speculation = "speculative";
  }
  if (parsed.empty() || top.diagnostics().has_errors()) {
    experiment.tune = std::move(spec);
    return;
  }

  // Every configuration is a variant, the start first (it is the report's baseline).
  auto space = spec.space();
  auto grid = space.grid();
  auto start = space.start();
  std::stable_partition(grid.begin(), grid.end(), [&](const tune::Config& c) { return c == start; });
  std::vector<std::string> benchmark_names;
  for (const auto& b : experiment.benchmarks) {
    benchmark_names.push_back(b.name);
  }
  for (const auto& config : grid) {
    Layer point_layer;
    for (const auto& [knob, value] : config) {
      auto at = std::find_if(parsed.begin(), parsed.end(), [&](const auto& p) { return p.dimension.knob == knob; });
      YAML::Node node = value == k_unset ? YAML::Node(YAML::NodeType::Null) : YAML::Node(value);
      point_layer.insert_or_assign("knobs." + knob, LayerEntry{util::YamlField(node, "tune.space." + knob, field.file(),
                                                                               field.diagnostics(), at->key_at),
                                                               at->key_at});
    }
    Layer merged = merge_layers({&defaults, &point_layer});
    Variant variant;
    variant.where = field.location();
    variant.benchmarks = benchmark_names;
    variant.server = resolve_server(merged, ctx, field.location(), "tune configuration " + tune::describe(config));
    std::vector<std::string> labels;
    for (const auto& d : spec.dimensions) {
      if (auto it = config.find(d.knob); it != config.end()) {
        // A knob with one value (the draft model that goes with speculation) names nothing.
        if (d.values.size() > 1) {
          labels.push_back(knob_label(d.knob, it->second, variant.server.tmpl.get()));
        }
        auto knob = variant.server.knobs.find(d.knob);
        variant.matrix_point.emplace_back(d.knob, knob != variant.server.knobs.end() ? *knob->second.value
                                                                                     : nlohmann::json(it->second));
      }
    }
    variant.name = util::join(labels, "-");
    variant.base_name = variant.name;
    variant.description = tune::describe(config);
    if (!util::path_safe_name(variant.name)) {
      field.error(fmt::format("the configuration {} is named \"{}\", too long for a result folder: give its knobs "
                              "shorter short names in the template",
                              tune::describe(config), variant.name));
      continue;
    }
    if (experiment.find_variant(variant.name) != nullptr) {
      field.error(fmt::format("two configurations are both named \"{}\"", variant.name));
      continue;
    }
    spec.trials[config] = variant.name;
    experiment.variants.push_back(std::move(variant));
  }
  experiment.tune = std::move(spec);
}

} // namespace detail

} // namespace specctl::experiment
