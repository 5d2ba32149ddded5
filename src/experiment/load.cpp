#include "layer.hpp"

#include <specctl/util/hash.hpp>
#include <specctl/util/text.hpp>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fmt/format.h>
#include <set>

namespace specctl::experiment {

namespace {

using detail::Layer;
using detail::LayerEntry;

constexpr std::size_t k_max_variants = 10'000;

const std::vector<std::string> k_top_keys = {"name",     "description", "hosts", "server", "matrix",
                                             "variants", "benchmarks",  "bench", "report", "tune"};
const std::vector<std::string> k_report_keys = {"baseline", "expect", "formats", "noise", "max_failed"};
// The A/A repeat `report: {noise: true}` adds is the baseline's name with this.
constexpr std::string_view k_noise_suffix = "-again";
const std::vector<std::string> k_expect_keys = {"variant", "benchmark", "level",    "rate",
                                                "metric",  "value",     "tolerance"};
const std::vector<std::string> k_formats = {"md", "csv", "json", "html", "junit"};

std::vector<std::string> variant_keys() {
  std::vector<std::string> keys = detail::server_keys();
  keys.insert(keys.begin(), {"name", "description", "matrix", "benchmarks", "repeat_of"});
  return keys;
}

struct Axis {
  std::string knob;
  util::Location key_at;
  std::vector<util::YamlField> values;
};

struct Matrix {
  std::vector<Axis> axes;
  // Each exclude is a set of knob -> value (as written) that removes the points matching all of them.
  std::vector<std::pair<util::YamlField, std::map<std::string, std::string>>> excludes;
};

Matrix parse_matrix(const util::YamlField& field) {
  Matrix matrix;
  if (!field.present() || !field.expect_map()) {
    return matrix;
  }
  field.check_duplicates();
  for (const auto& [key, key_at, value] : field.entries()) {
    if (key == "exclude") {
      if (!value.expect_list()) {
        continue;
      }
      for (const auto& item : value.items()) {
        if (!item.expect_map()) {
          continue;
        }
        std::map<std::string, std::string> pairs;
        for (const auto& [knob, knob_at, v] : item.entries()) {
          if (v.expect_scalar()) {
            pairs[knob] = v.node().Scalar();
          }
        }
        matrix.excludes.emplace_back(item, pairs);
      }
      continue;
    }
    Axis axis{key, key_at, {}};
    if (value.expect_list()) {
      for (const auto& item : value.items()) {
        if (item.expect_scalar()) {
          axis.values.push_back(item);
        }
      }
      if (value.items().empty()) {
        value.error(fmt::format("matrix axis \"{}\" has no values", key));
      }
    }
    matrix.axes.push_back(std::move(axis));
  }
  if (matrix.axes.empty()) {
    field.error("the matrix is empty: give at least one knob with a list of values");
  }
  return matrix;
}

bool is_number(const std::string& text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

struct Point {
  std::vector<std::pair<const Axis*, const util::YamlField*>> values;
};

std::vector<Point> expand(const Matrix& matrix, const util::YamlField& where, util::Diagnostics& diag) {
  std::vector<Point> points(1);
  for (const auto& axis : matrix.axes) {
    std::vector<Point> next;
    for (const auto& point : points) {
      for (const auto& value : axis.values) {
        Point p = point;
        p.values.emplace_back(&axis, &value);
        next.push_back(std::move(p));
      }
      if (next.size() > k_max_variants) {
        where.error(fmt::format("the matrix expands to more than {} variants", k_max_variants));
        return {};
      }
    }
    points = std::move(next);
  }
  std::vector<bool> used(matrix.excludes.size(), false);
  std::vector<Point> kept;
  for (const auto& point : points) {
    bool excluded = false;
    for (std::size_t i = 0; i < matrix.excludes.size(); ++i) {
      const auto& pairs = matrix.excludes[i].second;
      bool all = !pairs.empty();
      for (const auto& [knob, value] : pairs) {
        auto it = std::find_if(point.values.begin(), point.values.end(),
                               [&](const auto& pv) { return pv.first->knob == knob; });
        all = all && it != point.values.end() && it->second->node().Scalar() == value;
      }
      if (all) {
        excluded = true;
        used[i] = true;
      }
    }
    if (!excluded) {
      kept.push_back(point);
    }
  }
  for (std::size_t i = 0; i < matrix.excludes.size(); ++i) {
    const auto& [item, pairs] = matrix.excludes[i];
    for (const auto& [knob, value] : pairs) {
      bool is_axis = std::any_of(matrix.axes.begin(), matrix.axes.end(), [&](const Axis& a) { return a.knob == knob; });
      if (!is_axis) {
        std::vector<std::string> names;
        for (const auto& a : matrix.axes) {
          names.push_back(a.knob);
        }
        item.error(
            fmt::format("exclude names \"{}\", which is not a matrix axis{}", knob, util::did_you_mean(knob, names)));
        used[i] = true;
      }
    }
    if (!used[i]) {
      item.error("this exclude matches no matrix point");
    }
  }
  if (!points.empty() && kept.empty() && !diag.has_errors()) {
    where.error("the matrix excludes every point: no variant is left");
  }
  return kept;
}

// A variant written as `repeat_of: NAME`: only its name and description are its own.
void add_repeat(const util::YamlField& item, const util::YamlField& repeat_of, const std::string& name,
                std::map<std::string, util::Location>& seen, Experiment& experiment,
                std::vector<std::pair<std::size_t, util::YamlField>>& repeats) {
  auto target = repeat_of.as_string();
  if (!target) {
    return;
  }
  for (const auto& [key, key_at, value] : item.entries()) {
    if (key != "name" && key != "description" && key != "repeat_of") {
      item.diagnostics().error(
          key_at, fmt::format("a variant with repeat_of takes its server and benchmarks from \"{}\"", *target));
    }
  }
  auto [it, inserted] = seen.emplace(name, item.location());
  if (!inserted) {
    item.error(fmt::format("duplicate variant name \"{}\" (first defined at line {})", name, it->second.line));
    return;
  }
  Variant variant;
  variant.name = name;
  variant.base_name = name;
  variant.description = item["description"].present() ? item["description"].as_string().value_or("") : "";
  variant.repeat_of = *target;
  variant.where = item.location();
  repeats.emplace_back(experiment.variants.size(), repeat_of);
  experiment.variants.push_back(std::move(variant));
}

void resolve_repeat(Variant& repeat, const util::YamlField& field, const Experiment& experiment) {
  const Variant* original = experiment.find_variant(*repeat.repeat_of);
  if (original == nullptr) {
    std::vector<std::string> names;
    for (const auto& v : experiment.variants) {
      if (!v.repeat_of) {
        names.push_back(v.name);
      }
    }
    field.error(fmt::format("repeat_of \"{}\" names no variant{}", *repeat.repeat_of,
                            util::did_you_mean(*repeat.repeat_of, names)));
    return;
  }
  if (original->repeat_of) {
    field.error(fmt::format("\"{}\" is itself a repeat (of \"{}\"): repeat \"{}\" instead", original->name,
                            *original->repeat_of, *original->repeat_of));
    return;
  }
  repeat.server = original->server;
  repeat.benchmarks = original->benchmarks;
}

// Baseline first, so every other variant is measured after it; repeats last, so
// the spread between a variant and its repeat spans the sweep's drift. The
// others keep their order.
void order_variants(Experiment& experiment) {
  auto& variants = experiment.variants;
  const auto& baseline = experiment.report.baseline;
  std::stable_partition(variants.begin(), variants.end(), [](const Variant& v) { return !v.repeat_of; });
  if (baseline) {
    auto it = std::find_if(variants.begin(), variants.end(), [&](const Variant& v) { return v.name == *baseline; });
    if (it != variants.end()) {
      std::rotate(variants.begin(), it, std::next(it));
    }
  }
}

void parse_variants(const util::YamlField& top, const Layer& defaults, const Matrix& top_matrix,
                    const detail::ResolveContext& ctx, Experiment& experiment) {
  auto variants = top["variants"];
  if (!variants.present()) {
    top.error("no variants: add at least one, e.g. variants: [{name: baseline}]");
    return;
  }
  if (!variants.expect_list()) {
    return;
  }
  if (variants.items().empty()) {
    variants.error("the list of variants is empty");
  }
  // Each resolved variant holds its whole server configuration: a list past the cap
  // is refused before any is built (300,000 took 870 MB and 12 s to refuse later).
  if (variants.items().size() > k_max_variants) {
    variants.error(
        fmt::format("{} variants, more than the {} an experiment may list", variants.items().size(), k_max_variants));
    return;
  }
  std::map<std::string, util::Location> seen;
  // Repeats take everything from a variant that may come later in the file: resolved at the end.
  std::vector<std::pair<std::size_t, util::YamlField>> repeats;
  for (const auto& item : variants.items()) {
    if (!item.expect_map()) {
      continue;
    }
    item.check_keys(variant_keys());
    std::string base_name;
    if (auto name = item["name"]; name.present()) {
      base_name = name.as_string().value_or("");
      if (!util::path_safe_name(base_name)) {
        name.error(fmt::format("variant names are used in result paths: letters, digits, '.', '_' and '-', not only "
                               "dots, at most 128 characters; got \"{}\"",
                               base_name));
      }
    } else {
      item.error("a variant needs a name");
      continue;
    }
    if (auto r = item["repeat_of"]; r.present()) {
      add_repeat(item, r, base_name, seen, experiment, repeats);
      continue;
    }
    Layer layer;
    detail::flatten_server_block(item, layer);
    Matrix matrix = top_matrix;
    if (auto m = item["matrix"]; m.present()) {
      Matrix own = parse_matrix(m);
      for (auto& axis : own.axes) {
        auto same =
            std::find_if(matrix.axes.begin(), matrix.axes.end(), [&](const Axis& a) { return a.knob == axis.knob; });
        if (same != matrix.axes.end()) {
          *same = axis;
        } else {
          matrix.axes.push_back(axis);
        }
      }
      matrix.excludes.insert(matrix.excludes.end(), own.excludes.begin(), own.excludes.end());
    }
    std::vector<std::string> benchmark_names;
    if (auto b = item["benchmarks"]; b.present()) {
      benchmark_names = b.as_string_list().value_or(std::vector<std::string>{});
      for (std::size_t i = 0; i < benchmark_names.size(); ++i) {
        if (experiment.find_benchmark(benchmark_names[i]) == nullptr) {
          std::vector<std::string> names;
          for (const auto& spec : experiment.benchmarks) {
            names.push_back(spec.name);
          }
          b.items()[i].error(fmt::format("unknown benchmark \"{}\"{}", benchmark_names[i],
                                         util::did_you_mean(benchmark_names[i], names)));
        }
      }
    } else {
      for (const auto& spec : experiment.benchmarks) {
        benchmark_names.push_back(spec.name);
      }
    }
    std::string description = item["description"].present() ? item["description"].as_string().value_or("") : "";
    std::string owner = fmt::format("variant \"{}\"", base_name);

    std::vector<Point> points = matrix.axes.empty() ? std::vector<Point>(1) : expand(matrix, item, *ctx.diag);
    if (experiment.variants.size() + points.size() > k_max_variants) {
      item.error(fmt::format("the variants expand to more than {} in all", k_max_variants));
      return;
    }
    for (const auto& point : points) {
      Layer point_layer;
      for (const auto& [axis, value] : point.values) {
        point_layer.insert_or_assign("knobs." + axis->knob, LayerEntry{*value, axis->key_at});
      }
      Layer merged = detail::merge_layers({&defaults, &layer, &point_layer});
      Variant variant;
      variant.base_name = base_name;
      variant.description = description;
      variant.where = item.location();
      variant.benchmarks = benchmark_names;
      variant.server = detail::resolve_server(merged, ctx, item.location(), owner);
      variant.name = base_name;
      for (const auto& [axis, value] : point.values) {
        variant.name += "-" + detail::knob_label(axis->knob, value->node().Scalar(), variant.server.tmpl.get());
        auto knob = variant.server.knobs.find(axis->knob);
        variant.matrix_point.emplace_back(axis->knob, knob != variant.server.knobs.end()
                                                          ? *knob->second.value
                                                          : nlohmann::json(value->node().Scalar()));
      }
      if (!util::path_safe_name(variant.name)) {
        item.error(fmt::format("variant \"{}\": {} characters with its matrix point, more than a result folder's name "
                               "may have ({}): shorten the name or the knobs' short names",
                               variant.name, variant.name.size(), util::k_max_name_length));
        continue;
      }
      auto [it, inserted] = seen.emplace(variant.name, item.location());
      if (!inserted) {
        item.error(
            fmt::format("duplicate variant name \"{}\" (first defined at line {})", variant.name, it->second.line));
        continue;
      }
      experiment.variants.push_back(std::move(variant));
    }
  }
  for (const auto& [index, field] : repeats) {
    resolve_repeat(experiment.variants[index], field, experiment);
  }
}

void parse_expectation(const util::YamlField& item, Experiment& experiment, Expectation& e) {
  e.where = item.location();
  item.check_keys(k_expect_keys);
  for (const char* key : {"variant", "benchmark", "metric", "value"}) {
    if (!item[key].present()) {
      item.error(fmt::format("an expectation needs \"{}\"", key));
    }
  }
  const Variant* variant = nullptr;
  if (auto v = item["variant"]; v.present()) {
    e.variant = v.as_string().value_or("");
    variant = experiment.find_variant(e.variant);
    if (variant == nullptr) {
      std::vector<std::string> names;
      for (const auto& x : experiment.variants) {
        names.push_back(x.name);
      }
      v.error(fmt::format("unknown variant \"{}\"{}", e.variant, util::did_you_mean(e.variant, names)));
    }
  }
  const BenchmarkSpec* bench = nullptr;
  if (auto b = item["benchmark"]; b.present()) {
    e.benchmark = b.as_string().value_or("");
    bench = experiment.find_benchmark(e.benchmark);
    if (bench == nullptr) {
      std::vector<std::string> names;
      for (const auto& x : experiment.benchmarks) {
        names.push_back(x.name);
      }
      b.error(fmt::format("unknown benchmark \"{}\"{}", e.benchmark, util::did_you_mean(e.benchmark, names)));
    } else if (variant != nullptr && std::find(variant->benchmarks.begin(), variant->benchmarks.end(), e.benchmark) ==
                                         variant->benchmarks.end()) {
      b.error(fmt::format("variant \"{}\" does not run benchmark \"{}\"", e.variant, e.benchmark));
    }
  }
  if (auto l = item["level"]; l.present()) {
    e.level = static_cast<int>(l.as_int(1, 100'000).value_or(0));
    if (bench != nullptr && bench->kind != BenchmarkKind::concurrency) {
      l.error(fmt::format("benchmark \"{}\" has no concurrency levels", bench->name));
    } else if (bench != nullptr &&
               std::find(bench->levels.begin(), bench->levels.end(), *e.level) == bench->levels.end()) {
      l.error(fmt::format("benchmark \"{}\" does not run level {}", bench->name, *e.level));
    }
  } else if (bench != nullptr && bench->kind == BenchmarkKind::concurrency) {
    item.error(fmt::format("benchmark \"{}\" runs several levels: say which one with \"level\"", bench->name));
  }
  if (auto r = item["rate"]; r.present()) {
    e.rate = r.as_number();
    if (bench != nullptr && bench->kind != BenchmarkKind::rate) {
      r.error(fmt::format("benchmark \"{}\" has no request rates", bench->name));
    } else if (bench != nullptr && e.rate &&
               std::find(bench->rates.begin(), bench->rates.end(), *e.rate) == bench->rates.end()) {
      r.error(fmt::format("benchmark \"{}\" does not run rate {}", bench->name, *e.rate));
    }
  } else if (bench != nullptr && bench->kind == BenchmarkKind::rate) {
    item.error(fmt::format("benchmark \"{}\" runs several rates: say which one with \"rate\"", bench->name));
  }
  if (auto m = item["metric"]; m.present()) {
    e.metric = m.as_string().value_or("");
    if (bench != nullptr) {
      auto known = metrics_of(*bench);
      if (std::find(known.begin(), known.end(), e.metric) == known.end()) {
        m.error(fmt::format("benchmark \"{}\" has no metric \"{}\"{}; it has {}", bench->name, e.metric,
                            util::did_you_mean(e.metric, known), util::join(known, ", ")));
      }
    }
  }
  if (auto v = item["value"]; v.present()) {
    e.value = v.as_number().value_or(0);
  }
  if (auto t = item["tolerance"]; t.present()) {
    e.tolerance_pct = t.as_percent().value_or(e.tolerance_pct);
  }
}

void add_noise_repeat(const util::YamlField& noise, Experiment& experiment) {
  const auto& baseline = experiment.report.baseline;
  const Variant* original = baseline ? experiment.find_variant(*baseline) : nullptr;
  if (original == nullptr) {
    return;
  }
  Variant repeat;
  repeat.name = original->name + std::string(k_noise_suffix);
  if (experiment.find_variant(repeat.name) != nullptr) {
    noise.error(fmt::format("noise: true adds the variant \"{}\", but the experiment already has one by that name",
                            repeat.name));
    return;
  }
  if (!util::path_safe_name(repeat.name)) {
    noise.error(fmt::format("noise: true adds the variant \"{}\", a name too long for a result folder: shorten \"{}\"",
                            repeat.name, original->name));
    return;
  }
  repeat.base_name = repeat.name;
  repeat.description = fmt::format("{} again: how far two runs of the same server differ", original->name);
  repeat.repeat_of = original->name;
  repeat.server = original->server;
  repeat.benchmarks = original->benchmarks;
  repeat.where = noise.location();
  experiment.variants.push_back(std::move(repeat));
}

void parse_report(const util::YamlField& field, Experiment& experiment) {
  auto first = std::find_if(experiment.variants.begin(), experiment.variants.end(),
                            [](const Variant& v) { return !v.repeat_of; });
  if (first != experiment.variants.end()) {
    experiment.report.baseline = first->name;
  }
  if (!field.present() || !field.expect_map()) {
    order_variants(experiment);
    return;
  }
  field.check_keys(k_report_keys);
  if (auto b = field["baseline"]; b.present()) {
    auto name = b.as_string();
    const Variant* variant = name ? experiment.find_variant(*name) : nullptr;
    if (name && variant == nullptr) {
      std::vector<std::string> names;
      for (const auto& v : experiment.variants) {
        names.push_back(v.name);
      }
      b.error(fmt::format("baseline \"{}\" names no variant{}", *name, util::did_you_mean(*name, names)));
    } else if (variant != nullptr && variant->repeat_of) {
      b.error(fmt::format("baseline \"{}\" is a repeat of \"{}\": name \"{}\" instead", *name, *variant->repeat_of,
                          *variant->repeat_of));
    }
    experiment.report.baseline = name;
  }
  if (auto n = field["noise"]; n.present()) {
    experiment.report.noise = n.as_bool().value_or(false);
    if (experiment.report.noise) {
      add_noise_repeat(n, experiment);
    }
  }
  if (auto m = field["max_failed"]; m.present()) {
    experiment.report.max_failed_pct = m.as_percent().value_or(experiment.report.max_failed_pct);
    if (experiment.report.max_failed_pct > 100) {
      m.error("max_failed is a share of a measurement's requests: at most 100%");
    }
  }
  order_variants(experiment);
  if (auto expect = field["expect"]; expect.present() && expect.expect_list()) {
    for (const auto& item : expect.items()) {
      if (!item.expect_map()) {
        continue;
      }
      Expectation e;
      parse_expectation(item, experiment, e);
      experiment.report.expect.push_back(std::move(e));
    }
  }
  if (auto formats = field["formats"]; formats.present() && formats.expect_list()) {
    experiment.report.formats.clear();
    for (const auto& item : formats.items()) {
      if (auto format = item.as_choice(k_formats)) {
        experiment.report.formats.push_back(*format);
      }
    }
  }
}

} // namespace

namespace detail {

std::string knob_label(const std::string& knob, const std::string& value, const server::ServerTemplate* tmpl) {
  std::string short_name = knob;
  if (tmpl != nullptr) {
    if (const auto* def = tmpl->find_knob(knob)) {
      short_name = def->short_name;
    }
  }
  if (value == "true" || value == "false") {
    return fmt::format("{}-{}", util::slug(short_name), value == "true" ? "on" : "off");
  }
  if (is_number(value)) {
    return util::slug(short_name) + value;
  }
  return fmt::format("{}-{}", util::slug(short_name), util::slug(value));
}

} // namespace detail

Experiment load_experiment(const std::string& path, util::Diagnostics& diag) {
  Experiment experiment;
  experiment.file = path;
  std::string text;
  YAML::Node root = util::load_yaml_file(path, path, diag, &text);
  if (!root.IsDefined()) {
    return experiment;
  }
  experiment.content_hash = util::fingerprint(text);
  util::YamlField top(root, "", path, diag);
  if (!top.expect_map()) {
    return experiment;
  }
  top.check_keys(k_top_keys);

  if (auto name = top["name"]; name.present()) {
    experiment.name = name.as_string().value_or("");
    if (!util::path_safe_name(experiment.name)) {
      name.error(fmt::format("the name is used in result paths: letters, digits, '.', '_' and '-', not only dots, at "
                             "most 128 characters; got \"{}\"",
                             experiment.name));
    }
  } else {
    top.error("missing \"name\" (it names the results folder)");
  }
  if (auto description = top["description"]; description.present()) {
    experiment.description = description.as_string().value_or("");
  }
  experiment.hosts = detail::parse_hosts(top["hosts"]);

  std::string dir = std::filesystem::path(path).parent_path().string();
  // A tuning file may leave its only benchmark to `tune.load`.
  if (!top["tune"].present() || top["benchmarks"].present()) {
    experiment.benchmarks = detail::parse_benchmarks(top["benchmarks"], dir);
  }
  detail::parse_bench_defaults(top["bench"], experiment);

  Layer defaults;
  bool server_block_broken = false;
  if (auto server = top["server"]; server.present()) {
    server_block_broken = !server.expect_map();
    server.check_keys(detail::server_keys());
    detail::flatten_server_block(server, defaults);
  }
  Matrix top_matrix;
  if (auto matrix = top["matrix"]; matrix.present()) {
    top_matrix = parse_matrix(matrix);
  }
  std::map<std::string, std::shared_ptr<const server::ServerTemplate>> templates;
  detail::ResolveContext ctx{&experiment.hosts, server::template_search_path(dir), &templates, &diag,
                             server_block_broken};
  if (top["tune"].present()) {
    detail::parse_tune(top, defaults, ctx, dir, experiment);
  } else {
    parse_variants(top, defaults, top_matrix, ctx, experiment);
  }
  parse_report(top["report"], experiment);
  detail::resolve_repeats(experiment);
  return experiment;
}

} // namespace specctl::experiment
