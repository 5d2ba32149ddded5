#include <specctl/run/command_metrics.hpp>

#include <specctl/util/text.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <optional>
#include <regex>

namespace specctl::run {

namespace {

// Longest piece of a non-number quoted in a problem.
constexpr std::size_t k_quote_limit = 60;

std::string clip(std::string_view text) {
  return util::clip(text, k_quote_limit);
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// "1,234.5" -> 1234.5. A comma must separate groups of three digits, so "3,21"
// (a decimal comma) is not silently read as 321.
std::optional<double> parse_grouped_number(std::string_view raw) {
  std::string_view text = util::trim_view(raw);
  if (!text.empty() && text.front() == '+') {
    text.remove_prefix(1);
  }
  std::string plain;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != ',') {
      plain += text[i];
      continue;
    }
    const bool grouped = i > 0 && is_digit(text[i - 1]) && i + 3 < text.size() && is_digit(text[i + 1]) &&
                         is_digit(text[i + 2]) && is_digit(text[i + 3]) &&
                         (i + 4 == text.size() || !is_digit(text[i + 4]));
    if (!grouped) {
      return std::nullopt;
    }
  }
  double value = 0;
  const char* end = plain.data() + plain.size();
  auto [stop, ec] = std::from_chars(plain.data(), end, value);
  if (plain.empty() || ec != std::errc() || stop != end || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

// One step of a JSON path: a key, or an index when `key` is empty.
struct PathStep {
  std::string key;
  std::size_t index = 0;
};

std::optional<std::vector<PathStep>> parse_path(std::string_view path) {
  std::vector<PathStep> steps;
  std::size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '[') {
      const auto close = path.find(']', i);
      if (close == std::string_view::npos || close == i + 1) {
        return std::nullopt;
      }
      std::size_t index = 0;
      auto [stop, ec] = std::from_chars(path.data() + i + 1, path.data() + close, index);
      if (ec != std::errc() || stop != path.data() + close) {
        return std::nullopt;
      }
      steps.push_back({"", index});
      i = close + 1;
      continue;
    }
    if (path[i] == '.') {
      if (steps.empty() || i + 1 >= path.size()) {
        return std::nullopt;
      }
      ++i;
    }
    const auto end = path.find_first_of(".[", i);
    const auto stop = end == std::string_view::npos ? path.size() : end;
    if (stop == i) {
      return std::nullopt;
    }
    steps.push_back({std::string(path.substr(i, stop - i)), 0});
    i = stop;
  }
  if (steps.empty()) {
    return std::nullopt;
  }
  return steps;
}

std::string describe_json(const nlohmann::json& value) {
  return value.is_object()   ? "an object"
         : value.is_array()  ? fmt::format("a list of {}", value.size())
         : value.is_string() ? fmt::format("the text \"{}\"", clip(value.get<std::string>()))
                             : clip(value.dump());
}

std::expected<double, std::string> json_number(const nlohmann::json& doc, std::string_view path) {
  const auto steps = parse_path(path);
  if (!steps) {
    return std::unexpected("is not a path like results.throughput or runs[0].tok_s");
  }
  const nlohmann::json* at = &doc;
  std::string walked;
  for (const auto& step : *steps) {
    const std::string where = walked.empty() ? "the top level" : "\"" + walked + "\"";
    if (!step.key.empty()) {
      if (!at->is_object()) {
        return std::unexpected(fmt::format("{} is {}, not an object with \"{}\"", where, describe_json(*at), step.key));
      }
      auto it = at->find(step.key);
      if (it == at->end()) {
        return std::unexpected(fmt::format("{} has no key \"{}\"", where, step.key));
      }
      at = &*it;
      walked += (walked.empty() ? "" : ".") + step.key;
    } else {
      if (!at->is_array()) {
        return std::unexpected(fmt::format("{} is {}, not a list", where, describe_json(*at)));
      }
      if (step.index >= at->size()) {
        return std::unexpected(fmt::format("{} has {} items, no [{}]", where, at->size(), step.index));
      }
      at = &(*at)[step.index];
      walked += fmt::format("[{}]", step.index);
    }
  }
  if (at->is_number()) {
    const double value = at->get<double>();
    if (std::isfinite(value)) {
      return value;
    }
  }
  if (at->is_string()) {
    if (auto value = parse_grouped_number(at->get<std::string>())) {
      return *value;
    }
  }
  return std::unexpected(fmt::format("is {}, not a number", describe_json(*at)));
}

std::optional<nlohmann::json> parse_object(std::string_view text) {
  auto doc = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return std::nullopt;
  }
  return doc;
}

// The JSON a command printed: the whole output, else the last object that
// starts a line with "{" (in column 0, so the indented inner objects of
// pretty-printed JSON do not count) and either ends on that line or at the
// first line after it that is a lone "}" (pretty-printed, maybe after noise).
std::optional<nlohmann::json> find_json(std::string_view text) {
  const std::string_view whole = util::trim_view(text);
  if (!whole.empty()) {
    auto doc = nlohmann::json::parse(whole.begin(), whole.end(), nullptr, false);
    if (!doc.is_discarded()) {
      return doc;
    }
  }
  struct Line {
    std::size_t begin;
    std::size_t end;
  };
  std::vector<Line> lines;
  for (std::size_t begin = 0; begin < text.size();) {
    const auto newline = text.find('\n', begin);
    const std::size_t end = newline == std::string_view::npos ? text.size() : newline;
    lines.push_back({begin, end});
    begin = end + 1;
  }
  const auto line_text = [&](const Line& line) { return text.substr(line.begin, line.end - line.begin); };
  for (std::size_t i = lines.size(); i-- > 0;) {
    if (!line_text(lines[i]).starts_with('{')) {
      continue;
    }
    if (auto doc = parse_object(line_text(lines[i]))) {
      return doc;
    }
    for (std::size_t j = i + 1; j < lines.size(); ++j) {
      if (util::trim_view(line_text(lines[j])) == "}" && line_text(lines[j]).starts_with('}')) {
        if (auto doc = parse_object(text.substr(lines[i].begin, lines[j].end - lines[i].begin))) {
          return doc;
        }
        break;
      }
    }
  }
  return std::nullopt;
}

std::expected<double, std::string> regex_number(const std::string& pattern, std::string_view text) {
  std::regex re;
  try {
    re.assign(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return std::unexpected(fmt::format("is not a valid regular expression ({})", e.what()));
  }
  // Line by line, each line's first util::k_regex_window bytes: std::regex would overflow
  // the stack running a pattern over an unbounded line.
  std::match_results<std::string_view::const_iterator> m;
  bool found = false;
  while (!found && !text.empty()) {
    auto end = text.find('\n');
    auto line = util::regex_window(text.substr(0, end));
    found = std::regex_search(line.begin(), line.end(), m, re);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  }
  if (!found) {
    return std::unexpected(std::string("matches nothing in the output"));
  }
  if (m.size() < 2 || !m[1].matched) {
    return std::unexpected(fmt::format("matched \"{}\" but has no group ( ) around the number", clip(m[0].str())));
  }
  if (auto value = parse_grouped_number(m[1].str())) {
    return *value;
  }
  return std::unexpected(fmt::format("matched \"{}\", not a number", clip(m[1].str())));
}

} // namespace

std::map<std::string, double> extract_metrics(const std::vector<experiment::MetricExtractor>& extractors,
                                              std::string_view stdout_text, std::vector<std::string>& problems) {
  std::map<std::string, double> metrics;
  std::optional<std::optional<nlohmann::json>> doc;
  for (const auto& extractor : extractors) {
    std::expected<double, std::string> value;
    if (extractor.kind == experiment::ExtractKind::regex) {
      value = regex_number(extractor.pattern, stdout_text);
      if (!value) {
        problems.push_back(
            fmt::format("metric \"{}\": pattern \"{}\" {}", extractor.metric, extractor.pattern, value.error()));
        continue;
      }
    } else {
      if (!doc) {
        doc = find_json(stdout_text);
      }
      if (!*doc) {
        problems.push_back(fmt::format("metric \"{}\": json path \"{}\": the output holds no JSON object",
                                       extractor.metric, extractor.pattern));
        continue;
      }
      value = json_number(**doc, extractor.pattern);
      if (!value) {
        problems.push_back(
            fmt::format("metric \"{}\": json path \"{}\": {}", extractor.metric, extractor.pattern, value.error()));
        continue;
      }
    }
    metrics[extractor.metric] = *value;
  }
  return metrics;
}

} // namespace specctl::run
