#include <specctl/bench/breakdown.hpp>

#include <specctl/bench/stats.hpp>

#include <algorithm>
#include <cmath>
#include <map>

namespace specctl::bench {

std::vector<std::string> categories_of(const std::vector<WorkloadRequest>& requests) {
  std::vector<std::string> out;
  for (const auto& request : requests) {
    if (!request.category.empty() && std::find(out.begin(), out.end(), request.category) == out.end()) {
      out.push_back(request.category);
    }
  }
  return out;
}

std::vector<CategoryFigures> category_figures(const std::vector<RequestRecord>& records,
                                              const std::vector<std::string>& order) {
  std::vector<CategoryFigures> out;
  std::map<std::string, std::vector<double>, std::less<>> speeds;
  const auto slot = [&out](const std::string& category) -> CategoryFigures& {
    auto it = std::find_if(out.begin(), out.end(), [&](const CategoryFigures& f) { return f.category == category; });
    if (it != out.end()) {
      return *it;
    }
    out.emplace_back();
    out.back().category = category;
    return out.back();
  };
  bool any = false;
  for (const auto& r : records) {
    any = any || !r.category.empty();
  }
  if (!any) {
    return out;
  }
  for (const auto& category : order) {
    slot(category);
  }
  const auto add = [](std::int64_t& sum, int value) {
    if (value >= 0) {
      sum = std::max<std::int64_t>(sum, 0) + value;
    }
  };
  for (const auto& r : records) {
    if (r.category.empty()) {
      continue;
    }
    CategoryFigures& figures = slot(r.category);
    if (!r.ok()) {
      ++figures.failed;
      continue;
    }
    ++figures.completed;
    if (r.e2e_ms > 0) {
      speeds[r.category].push_back(r.output_tokens / (r.e2e_ms / 1000.0));
    }
    add(figures.draft_accepted, r.draft_accepted);
    add(figures.predicted_tokens, r.server_predicted_n);
  }
  for (auto& figures : out) {
    if (auto it = speeds.find(figures.category); it != speeds.end() && !it->second.empty()) {
      figures.tok_s = mean(it->second);
    }
  }
  return out;
}

std::vector<CategoryPart> split_by_category(const std::vector<WorkloadRequest>& requests, int runs) {
  const auto categories = categories_of(requests);
  const bool all_tagged =
      std::all_of(requests.begin(), requests.end(), [](const WorkloadRequest& r) { return !r.category.empty(); });
  if (categories.size() < 2 || !all_tagged || runs < 1) {
    return {};
  }
  std::vector<CategoryPart> parts;
  for (const auto& category : categories) {
    CategoryPart part;
    part.category = category;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (requests[i].category == category) {
        part.prompts.push_back(requests[i]);
        part.prompt_index.push_back(static_cast<int>(i));
      }
    }
    parts.push_back(std::move(part));
  }
  for (int k = 0; k < runs; ++k) {
    const auto& category = requests[static_cast<std::size_t>(k) % requests.size()].category;
    const auto at = std::find(categories.begin(), categories.end(), category) - categories.begin();
    ++parts[static_cast<std::size_t>(at)].runs;
  }
  // A category no pick fell on is not run (fewer runs than categories).
  std::erase_if(parts, [](const CategoryPart& part) { return part.runs == 0; });
  return parts;
}

SingleStreamResult merge_single_stream(std::vector<SingleStreamPart> parts) {
  SingleStreamResult out;
  if (parts.empty()) {
    return out;
  }
  LevelResult& level = out.level;
  const LevelResult& first = parts.front().result.level;
  level.concurrency = first.concurrency;
  level.started = first.started;
  level.tunnel_rtt_ms = first.tunnel_rtt_ms;
  int index = 0;
  for (auto& part : parts) {
    LevelResult& piece = part.result.level;
    for (auto& record : piece.records) {
      record.index = index++;
      const auto p = static_cast<std::size_t>(record.prompt);
      if (record.prompt >= 0 && p < part.prompt_index.size()) {
        record.prompt = part.prompt_index[p];
      }
      record.start_s += level.duration_s;
      level.records.push_back(std::move(record));
    }
    level.duration_s += piece.duration_s;
    level.client_cpu_s += piece.client_cpu_s;
    level.events += piece.events;
    level.interrupted = level.interrupted || piece.interrupted;
    level.timed_out = level.timed_out || piece.timed_out;
    level.remeasured.insert(level.remeasured.end(), piece.remeasured.begin(), piece.remeasured.end());
    if (out.ended == Ended::normally) {
      out.ended = part.result.ended;
    }
  }
  aggregate(level);
  summarize_runs(out);
  return out;
}

std::optional<LengthHistogram> length_histogram(const std::vector<int>& values, int max_bins) {
  if (values.empty() || max_bins < 1) {
    return std::nullopt;
  }
  const auto [low, high] = std::minmax_element(values.begin(), values.end());
  // The smallest round width that fits the values into max_bins bins, the first
  // starting at a multiple of the width.
  const auto fits = [&, lo = *low, hi = *high](long width) {
    return (hi - (lo / width) * width) / width + 1 <= max_bins;
  };
  long width = 1;
  for (long scale = 1; !fits(width); scale *= 10) {
    for (long step : {1L, 2L, 5L}) {
      width = step * scale;
      if (fits(width)) {
        break;
      }
    }
  }
  LengthHistogram h;
  h.width = static_cast<int>(width);
  h.lo = static_cast<int>((*low / width) * width);
  h.counts.assign(static_cast<std::size_t>((*high - h.lo) / h.width + 1), 0);
  for (int v : values) {
    ++h.counts[static_cast<std::size_t>((v - h.lo) / h.width)];
  }
  return h;
}

} // namespace specctl::bench
