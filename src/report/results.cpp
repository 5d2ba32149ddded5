#include <specctl/report/results.hpp>

#include <specctl/util/text_table.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fstream>

namespace specctl::report {

namespace {

std::optional<double> as_number(const nlohmann::json& value) {
  if (value.is_number()) {
    return value.get<double>();
  }
  return std::nullopt;
}

const nlohmann::json* find_level(const nlohmann::json& benchmark, const experiment::Expectation& e) {
  const auto& levels = dig(benchmark, {"levels"});
  if (!levels.is_array()) {
    return nullptr;
  }
  for (const auto& level : levels) {
    if (!level.is_object()) {
      continue;
    }
    if (e.level && dig(level, {"concurrency"}).is_number_integer() && dig(level, {"concurrency"}) == *e.level) {
      return &level;
    }
    if (auto rate = as_number(dig(level, {"rate"})); e.rate && rate && std::abs(*rate - *e.rate) < 1e-9) {
      return &level;
    }
  }
  return nullptr;
}

std::string figure(std::optional<double> value, int decimals = 1) {
  return value ? fmt::format("{:.{}f}", *value, decimals) : "-";
}

// One column of the summary: a header and how to read its cell from a result.
struct Column {
  std::string header;
  std::function<std::string(const nlohmann::json&)> cell;
};

std::vector<Column> summary_columns(const experiment::Experiment& experiment) {
  std::vector<Column> columns;
  columns.push_back({"load s", [](const nlohmann::json& r) { return figure(as_number(dig(r, {"load", "load_s"}))); }});
  bool any_accept = false;
  for (const auto& b : experiment.benchmarks) {
    std::string name = b.name;
    switch (b.kind) {
    case experiment::BenchmarkKind::single_stream:
      columns.push_back({name + " tok/s", [name](const nlohmann::json& r) {
                           const auto& m = dig(r, {"benchmarks", name, "metrics"});
                           auto mean = as_number(dig(m, {"output_tok_s"}));
                           auto sd = as_number(dig(m, {"output_tok_s_stdev"}));
                           if (!mean) {
                             return std::string("-");
                           }
                           return sd ? fmt::format("{:.1f} ± {:.1f}", *mean, *sd) : fmt::format("{:.1f}", *mean);
                         }});
      any_accept = true;
      break;
    case experiment::BenchmarkKind::concurrency:
    case experiment::BenchmarkKind::rate: {
      bool rate = b.kind == experiment::BenchmarkKind::rate;
      std::size_t count = rate ? b.rates.size() : b.levels.size();
      for (std::size_t i = 0; i < count; ++i) {
        std::string header =
            rate ? fmt::format("{} {:g}/s", name, b.rates[i]) : fmt::format("{} c{}", name, b.levels[i]);
        columns.push_back({header, [name, i](const nlohmann::json& r) {
                             const auto& levels = dig(r, {"benchmarks", name, "levels"});
                             if (!levels.is_array() || i >= levels.size()) {
                               return std::string("-");
                             }
                             return figure(as_number(dig(levels[i], {"metrics", "output_tok_s"})));
                           }});
      }
      any_accept = true;
      break;
    }
    case experiment::BenchmarkKind::command:
      for (const auto& x : b.extract) {
        std::string metric = x.metric;
        columns.push_back({name + " " + metric, [name, metric](const nlohmann::json& r) {
                             return figure(as_number(dig(r, {"benchmarks", name, "metrics", metric})), 2);
                           }});
      }
      break;
    }
  }
  if (any_accept) {
    columns.push_back({"accept len", [](const nlohmann::json& r) {
                         // The first benchmark that saw the server report it.
                         const auto& benchmarks = dig(r, {"benchmarks"});
                         if (!benchmarks.is_object()) {
                           return std::string("-");
                         }
                         for (const auto& [name, b] : benchmarks.items()) {
                           if (auto a = as_number(dig(b, {"metrics", "accept_length"}))) {
                             return fmt::format("{:.2f}", *a);
                           }
                         }
                         return std::string("-");
                       }});
  }
  return columns;
}

} // namespace

const nlohmann::json& dig(const nlohmann::json& j, std::initializer_list<std::string_view> keys) {
  static const nlohmann::json k_null;
  const nlohmann::json* at = &j;
  for (auto key : keys) {
    if (!at->is_object()) {
      return k_null;
    }
    auto it = at->find(key);
    if (it == at->end()) {
      return k_null;
    }
    at = &*it;
  }
  return *at;
}

nlohmann::json finite_or_null(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

std::optional<nlohmann::json> read_result(const ResultPaths& paths, const std::string& variant) {
  std::ifstream in(paths.result(variant));
  if (!in) {
    return std::nullopt;
  }
  auto result = nlohmann::json::parse(in, nullptr, false);
  if (result.is_discarded() || !result.is_object() || dig(result, {"format"}) != k_result_format) {
    return std::nullopt;
  }
  return result;
}

std::optional<std::string> result_damage(const ResultPaths& paths, const std::string& variant) {
  auto path = paths.result(variant);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return std::nullopt;
  }
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    auto result = nlohmann::json::parse(text);
    if (!result.is_object() || dig(result, {"format"}) != k_result_format) {
      return fmt::format("{}: damaged: not a specctl result (no \"format\": \"{}\")", path.string(), k_result_format);
    }
  } catch (const nlohmann::json::parse_error& e) {
    std::string why = e.what();
    // "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error ..."
    if (auto close = why.find("] "); why.starts_with("[json.exception") && close != std::string::npos) {
      why = why.substr(close + 2);
    }
    // e.byte counts from 1, and is one past the end when the file ends too soon.
    return fmt::format("{}: damaged at byte {} of {}: {}", path.string(), std::min<std::size_t>(e.byte, text.size()),
                       text.size(), why);
  }
  return std::nullopt;
}

nlohmann::json single_stream_metrics(const bench::SingleStreamResult& result) {
  const auto& level = result.level;
  // The decode speed without the prefill, to hold against the server's own figure.
  double decode_sum = 0;
  int decode_runs = 0;
  for (const auto& run : result.runs) {
    if (run.ok && std::isfinite(run.decode_tok_s)) {
      decode_sum += run.decode_tok_s;
      ++decode_runs;
    }
  }
  nlohmann::json out = {
      {"output_tok_s", finite_or_null(result.mean)},
      {"output_tok_s_median", finite_or_null(result.median)},
      {"output_tok_s_stdev", finite_or_null(result.stdev)},
      {"runs", result.runs.size()},
      {"ttft_ms", finite_or_null(level.ttft_ms.mean)},
      {"tpot_ms", finite_or_null(level.tpot_ms.mean)},
      {"e2e_ms", finite_or_null(level.e2e_ms.mean)},
      {"error_rate", finite_or_null(level.requests > 0 ? static_cast<double>(level.failed) / level.requests : NAN)},
      {"decode_tok_s", finite_or_null(decode_runs > 0 ? decode_sum / decode_runs : NAN)},
  };
  if (level.server_tok_s > 0) {
    // The server's own decode speed over the same requests (llama.cpp's timings.predicted_per_second).
    out["server_decode_tok_s"] = level.server_tok_s;
  }
  if (level.tunnel_rtt_ms) {
    // Beside TTFT: the SSH tunnel's round trip, which every TTFT measured through it holds.
    out["tunnel_rtt_ms"] = finite_or_null(*level.tunnel_rtt_ms);
  }
  return out;
}

nlohmann::json level_metrics(const bench::LevelResult& level) {
  nlohmann::json out = {
      {"output_tok_s", finite_or_null(level.output_tok_s)},
      {"request_s", finite_or_null(level.request_s)},
      {"error_rate", finite_or_null(level.requests > 0 ? static_cast<double>(level.failed) / level.requests : NAN)},
  };
  const std::pair<const char*, const bench::Summary*> latencies[] = {
      {"ttft", &level.ttft_ms}, {"tpot", &level.tpot_ms}, {"itl", &level.itl_ms}, {"e2e", &level.e2e_ms}};
  for (const auto& [name, summary] : latencies) {
    out[fmt::format("{}_p50_ms", name)] = finite_or_null(summary->p50);
    out[fmt::format("{}_p90_ms", name)] = finite_or_null(summary->p90);
    out[fmt::format("{}_p99_ms", name)] = finite_or_null(summary->p99);
  }
  if (level.tunnel_rtt_ms) {
    out["tunnel_rtt_ms"] = finite_or_null(*level.tunnel_rtt_ms);
  }
  return out;
}

std::optional<double> find_metric(const nlohmann::json& result, const experiment::Expectation& e) {
  const auto& benchmark = dig(result, {"benchmarks", e.benchmark});
  const nlohmann::json* holder = &benchmark;
  if (e.level || e.rate) {
    holder = find_level(benchmark, e);
    if (holder == nullptr) {
      return std::nullopt;
    }
  }
  return as_number(dig(*holder, {"metrics", e.metric}));
}

std::vector<std::pair<std::string, std::string>> summary_figures(const experiment::Experiment& experiment,
                                                                 const nlohmann::json& result) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& c : summary_columns(experiment)) {
    out.emplace_back(c.header, c.cell(result));
  }
  return out;
}

std::string format_summary(const experiment::Experiment& experiment, const ResultPaths& paths,
                           const std::vector<std::string>& variants) {
  auto columns = summary_columns(experiment);
  // Names left-aligned, figures right-aligned.
  std::vector<util::TableColumn> headers = {{"variant"}, {"status"}};
  for (const auto& c : columns) {
    headers.push_back({c.header, util::Align::right});
  }
  util::TextTable table(std::move(headers));
  std::vector<std::string> failures;
  for (const auto& name : variants) {
    std::vector<std::string> row = {name};
    auto result = read_result(paths, name);
    if (!result) {
      auto damage = result_damage(paths, name);
      row.push_back(damage ? "damaged" : "not run");
      if (damage) {
        failures.push_back(fmt::format("- {}: {}", name, *damage));
      }
      row.resize(columns.size() + 2, "-");
      table.add_row(std::move(row));
      continue;
    }
    const auto& status_field = dig(*result, {"status"});
    std::string status = status_field.is_string() ? status_field.get<std::string>() : "?";
    row.push_back(status);
    for (const auto& c : columns) {
      row.push_back(c.cell(*result));
    }
    if (status != "ok") {
      const auto& reason = dig(*result, {"reason"});
      failures.push_back(fmt::format("- {}: {}", name, reason.is_string() ? reason.get<std::string>() : status));
    }
    const auto& flags = dig(*result, {"flags"});
    for (const auto& flag : flags.is_array() ? flags : nlohmann::json::array()) {
      if (flag.is_string()) {
        failures.push_back(fmt::format("- {}: {}", name, flag.get<std::string>()));
      }
    }
    table.add_row(std::move(row));
  }
  std::string out = table.markdown();
  if (!failures.empty()) {
    out += "\n";
    for (const auto& f : failures) {
      out += f + "\n";
    }
  }
  return out;
}

} // namespace specctl::report
