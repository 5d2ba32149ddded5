// A variant's GPU power over time, read from the telemetry.csv the runner wrote
// beside its result.json: the rows of each sample summed over the GPUs, in
// windows wherever benchmark, level or repeat changes.

#include "build_parts.hpp"

#include <specctl/report/results.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <set>

namespace specctl::report::detail {

namespace {

// More points than this per variant are averaged in runs, so a long run draws a
// plot of a reasonable size.
constexpr std::size_t k_max_points = 1200;
// At most this many unreadable rows are named; the rest are counted.
constexpr std::size_t k_max_problems = 3;

// The fields of one CSV line, with RFC 4180 quotes.
std::vector<std::string> csv_fields(std::string_view line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else if (c != '\r') {
      out.back() += c;
    }
  }
  return out;
}

std::optional<double> cell_number(const std::string& cell) {
  double value = 0;
  auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
  if (cell.empty() || ec != std::errc() || end != cell.data() + cell.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

// One sample of all the GPUs: the rows from one index's to the next time it comes.
struct Block {
  double t = 0;
  std::set<int> gpus;
  std::optional<double> power;
  std::optional<double> limit;
};

// The windows' blocks as points, each window averaged in runs of `every` blocks.
std::vector<std::pair<double, double>> points_of(const std::vector<Block>& blocks, std::size_t every) {
  std::vector<std::pair<double, double>> out;
  for (std::size_t at = 0; at < blocks.size(); at += every) {
    double t = 0;
    double power = 0;
    int n = 0;
    for (std::size_t i = at; i < std::min(blocks.size(), at + every); ++i) {
      if (blocks[i].power) {
        t += blocks[i].t;
        power += *blocks[i].power;
        ++n;
      }
    }
    if (n > 0) {
      out.emplace_back(t / n, power / n);
    }
  }
  return out;
}

std::optional<PowerTrace> read_trace(const std::filesystem::path& path, const std::string& variant) {
  std::ifstream in(path);
  if (!in) {
    return std::nullopt;
  }
  PowerTrace trace;
  trace.variant = variant;
  std::string line;
  if (!std::getline(in, line)) {
    return std::nullopt;
  }
  const auto header = csv_fields(line);
  auto column = [&](std::string_view name) -> std::optional<std::size_t> {
    auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? std::nullopt : std::optional(static_cast<std::size_t>(it - header.begin()));
  };
  const auto benchmark = column("benchmark");
  const auto level = column("level");
  const auto repeat = column("repeat");
  const auto t_s = column("t_s");
  const auto index = column("index");
  const auto power = column("power_w");
  const auto limit = column("power_limit_w");
  if (!benchmark || !level || !repeat || !t_s || !index || !power) {
    trace.problems.push_back(fmt::format("{}:1: not the header of a telemetry.csv", path.filename().string()));
    return trace;
  }
  const std::size_t needed = std::max({*benchmark, *level, *repeat, *t_s, *index, *power}) + 1;
  std::vector<std::vector<Block>> blocks;
  std::set<int> gpus;
  std::size_t bad = 0;
  for (int number = 2; std::getline(in, line); ++number) {
    if (line.empty() || line == "\r") {
      continue;
    }
    const auto cells = csv_fields(line);
    auto t = cells.size() >= needed ? cell_number(cells[*t_s]) : std::nullopt;
    auto gpu = cells.size() >= needed ? cell_number(cells[*index]) : std::nullopt;
    if (!t || !gpu) {
      if (++bad <= k_max_problems) {
        trace.problems.push_back(fmt::format("{}:{}: no time or GPU index", path.filename().string(), number));
      }
      continue;
    }
    const int rep = static_cast<int>(cell_number(cells[*repeat]).value_or(1));
    if (trace.windows.empty() || trace.windows.back().benchmark != cells[*benchmark] ||
        trace.windows.back().level != cells[*level] || trace.windows.back().repeat != rep) {
      trace.windows.push_back({cells[*benchmark], cells[*level], rep, {}});
      blocks.emplace_back();
    }
    const int g = static_cast<int>(*gpu);
    gpus.insert(g);
    auto& window = blocks.back();
    if (window.empty() || window.back().gpus.count(g) > 0) {
      window.push_back({*t, {}, std::nullopt, std::nullopt});
    }
    auto& block = window.back();
    block.gpus.insert(g);
    if (auto w = cell_number(cells[*power])) {
      block.power = block.power.value_or(0) + *w;
    }
    if (auto w = limit && *limit < cells.size() ? cell_number(cells[*limit]) : std::nullopt) {
      block.limit = block.limit.value_or(0) + *w;
    }
  }
  if (bad > k_max_problems) {
    trace.problems.push_back(fmt::format("{} more rows without a time or GPU index", bad - k_max_problems));
  }
  trace.gpus = static_cast<int>(gpus.size());
  std::size_t total = 0;
  for (const auto& window : blocks) {
    total += window.size();
    for (const auto& block : window) {
      if (block.limit) {
        trace.limit_w = std::max(trace.limit_w.value_or(0), *block.limit);
      }
    }
  }
  const std::size_t every = std::max<std::size_t>(1, (total + k_max_points - 1) / k_max_points);
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    trace.windows[i].points = points_of(blocks[i], every);
  }
  return trace;
}

} // namespace

std::vector<PowerTrace> power_traces(const RunData& data, const std::vector<std::string>& variants) {
  std::vector<PowerTrace> out;
  if (data.dir.empty()) {
    return out;
  }
  ResultPaths paths{data.dir};
  for (const auto& variant : variants) {
    auto it = data.results.find(variant);
    std::string file = "telemetry.csv";
    if (it != data.results.end()) {
      // The name the result gives it; only a plain file name inside the variant's folder.
      if (const auto& named = dig(it->second, {"telemetry", "file"});
          named.is_string() && named.get<std::string>().find('/') == std::string::npos &&
          !named.get<std::string>().empty() && named.get<std::string>() != "..") {
        file = named.get<std::string>();
      }
    }
    if (auto trace = read_trace(paths.variant_dir(variant) / file, variant)) {
      out.push_back(std::move(*trace));
    }
  }
  return out;
}

} // namespace specctl::report::detail
