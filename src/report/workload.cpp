#include "workload.hpp"
#include "json_fields.hpp"

#include <specctl/bench/stats.hpp>
#include <specctl/report/results.hpp>

#include <algorithm>
#include <cmath>

namespace specctl::report::detail {

namespace {

using json = nlohmann::json;

int count(const json& value) {
  return static_cast<int>(std::lround(std::max(0.0, json_number(value).value_or(0))));
}

// Adds a holder's categories to `order`, keeping the workload's order: by_category's
// keys come back sorted when read with nlohmann::json, so the order written beside
// it ("category_order") goes first; keys it does not list follow.
void add_categories(std::vector<std::string>& order, const json& holder) {
  const auto& by_category = dig(holder, {"by_category"});
  if (!by_category.is_object()) {
    return;
  }
  auto add = [&](const std::string& category) {
    if (by_category.contains(category) && std::find(order.begin(), order.end(), category) == order.end()) {
      order.push_back(category);
    }
  };
  if (const auto& listed = dig(holder, {"category_order"}); listed.is_array()) {
    for (const auto& category : listed) {
      if (category.is_string()) {
        add(category.get<std::string>());
      }
    }
  }
  for (const auto& [category, figures] : by_category.items()) {
    add(category);
  }
}

// One variant's figures per category over its holders (the single-stream entry,
// or every repeat of one level): counts summed, tok/s and accept length the mean
// of the repeats that have them, since a repeat without one says nothing about it.
CategoryRow category_row(const std::string& variant, const std::vector<const json*>& holders,
                         const std::vector<std::string>& categories) {
  CategoryRow row{variant, {}, {}};
  for (const auto& category : categories) {
    std::optional<CategoryFigures> figures;
    std::vector<double> tok_s;
    std::vector<double> accept;
    for (const json* holder : holders) {
      const auto& f = dig(*holder, {"by_category", category});
      if (!f.is_object()) {
        continue;
      }
      if (!figures) {
        figures.emplace();
      }
      Counts counts;
      counts.completed = count(dig(f, {"completed"}));
      counts.failed = count(dig(f, {"failed"}));
      counts.requests = counts.completed + counts.failed;
      figures->counts += counts;
      if (auto v = json_number(dig(f, {"tok_s"}))) {
        tok_s.push_back(*v);
      }
      if (auto v = json_number(dig(f, {"accept_length"}))) {
        accept.push_back(*v);
        if (row.accept_length_source.empty()) {
          row.accept_length_source = accept_source_text(f);
        }
      }
    }
    if (figures && !tok_s.empty()) {
      figures->tok_s = bench::mean(tok_s);
    }
    if (figures && !accept.empty()) {
      figures->accept_length = bench::mean(accept);
    }
    row.categories.push_back(figures);
  }
  return row;
}

// A table over the holders each variant has; nullopt when none has a category.
template <typename HoldersOf>
std::optional<CategoryTable> category_table(CategoryTable table, const std::vector<std::string>& variants,
                                            HoldersOf holders_of) {
  std::vector<std::vector<const json*>> holders;
  for (const auto& variant : variants) {
    holders.push_back(holders_of(variant));
    for (const json* holder : holders.back()) {
      add_categories(table.categories, *holder);
    }
  }
  if (table.categories.empty()) {
    return std::nullopt;
  }
  for (std::size_t i = 0; i < variants.size(); ++i) {
    table.rows.push_back(category_row(variants[i], holders[i], table.categories));
  }
  return table;
}

std::optional<LengthHistogram> histogram_of(const json& holder) {
  auto lo = json_number(dig(holder, {"lo"}));
  auto width = json_number(dig(holder, {"width"}));
  const auto& counts = dig(holder, {"counts"});
  if (!lo || !width || *width <= 0 || !counts.is_array() || counts.empty()) {
    return std::nullopt;
  }
  LengthHistogram out{*lo, *width, {}, 0};
  for (const auto& c : counts) {
    auto v = json_number(c);
    if (!v || *v < 0) {
      return std::nullopt;
    }
    out.counts.push_back(count(c));
    out.requests += out.counts.back();
  }
  return out;
}

} // namespace

const json* benchmark_entry(const RunData& data, const std::string& variant, const std::string& benchmark) {
  auto it = data.results.find(variant);
  if (it == data.results.end()) {
    return nullptr;
  }
  const auto& entry = dig(it->second, {"benchmarks", benchmark});
  return entry.is_object() ? &entry : nullptr;
}

std::string accept_source_text(const json& holder) {
  std::string kind = dig(holder, {"accept_length_source", "kind"}).is_string()
                         ? dig(holder, {"accept_length_source", "kind"}).get<std::string>()
                         : std::string();
  if (kind == "log") {
    return "server log lines";
  }
  if (kind == "prometheus") {
    return "/metrics counters";
  }
  if (kind == "responses") {
    return "response timings";
  }
  return kind;
}

std::optional<CategoryTable> single_stream_categories(const RunData& data, const SingleStreamTable& table) {
  std::vector<std::string> variants;
  for (const auto& row : table.rows) {
    variants.push_back(row.variant);
  }
  CategoryTable base;
  base.benchmark = table.benchmark;
  base.kind = "single_stream";
  return category_table(std::move(base), variants, [&](const std::string& variant) {
    const json* entry = benchmark_entry(data, variant, table.benchmark);
    return entry != nullptr ? std::vector<const json*>{entry} : std::vector<const json*>{};
  });
}

std::vector<CategoryTable> level_categories(const RunData& data, const LevelsTable& table) {
  std::vector<std::string> variants;
  for (const auto& row : table.rows) {
    variants.push_back(row.variant);
  }
  const char* key = table.rate ? "rate" : "concurrency";
  std::vector<CategoryTable> out;
  for (std::size_t i = 0; i < table.levels.size(); ++i) {
    CategoryTable base;
    base.benchmark = table.benchmark;
    base.kind = table.rate ? "rate" : "concurrency";
    base.level = table.label(i);
    base.repeats = table.repeats;
    auto built = category_table(std::move(base), variants, [&](const std::string& variant) {
      std::vector<const json*> repeats;
      if (const json* entry = benchmark_entry(data, variant, table.benchmark)) {
        if (const auto& levels = dig(*entry, {"levels"}); levels.is_array()) {
          for (const auto& level : levels) {
            if (json_number(dig(level, {key})) == table.levels[i]) {
              repeats.push_back(&level);
            }
          }
        }
      }
      return repeats;
    });
    if (built) {
      out.push_back(std::move(*built));
    }
  }
  return out;
}

std::optional<LengthHistograms> length_histograms(const RunData& data, const std::string& benchmark,
                                                  const std::vector<std::string>& variants,
                                                  const std::string& baseline) {
  struct Found {
    std::string variant;
    std::optional<LengthHistogram> input;
    std::optional<LengthHistogram> output;
  };
  std::vector<Found> found;
  for (const auto& variant : variants) {
    if (const json* entry = benchmark_entry(data, variant, benchmark)) {
      Found f{variant, histogram_of(dig(*entry, {"lengths", "input_tokens"})),
              histogram_of(dig(*entry, {"lengths", "output_tokens"}))};
      if (f.input || f.output) {
        found.push_back(std::move(f));
      }
    }
  }
  if (found.empty()) {
    return std::nullopt;
  }
  auto shown = std::find_if(found.begin(), found.end(), [&](const Found& f) { return f.variant == baseline; });
  if (shown == found.end()) {
    shown = found.begin();
  }
  LengthHistograms out{benchmark, shown->variant, shown->input, shown->output, {}, {}};
  for (const auto& f : found) {
    if (f.variant != shown->variant) {
      (f.input == shown->input && f.output == shown->output ? out.same : out.differing).push_back(f.variant);
    }
  }
  return out;
}

} // namespace specctl::report::detail
