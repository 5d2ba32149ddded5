#include <specctl/run/command_bench.hpp>

#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <optional>
#include <regex>

namespace specctl::run {

namespace {

// Longest piece of a non-number quoted in a problem.
constexpr std::size_t k_quote_limit = 60;

std::string clip(std::string_view text) {
  if (text.size() <= k_quote_limit) {
    return std::string(text);
  }
  return std::string(text.substr(0, k_quote_limit)) + "...";
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// "1,234.5" -> 1234.5. A comma must separate groups of three digits, so "3,21"
// (a decimal comma) is not silently read as 321.
std::optional<double> parse_number(std::string_view raw) {
  std::string_view text = trim(raw);
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

// Where a placeholder sits in the shell line, so that its quoted value can be
// put outside the user's own quotes. It follows quotes, backslashes, comments,
// $( ) and backquotes the way a POSIX shell does; enough for a command line,
// not a full parser (no here-documents, no case patterns, no ${...} words).
class QuoteTracker {
public:
  // ' ' (unquoted), '\'', '"' or '#' (a comment, up to the end of the line).
  char state() const { return m_state; }
  // The last character was a backslash that escapes the next one.
  bool escaped() const { return m_escaped; }
  // The last character was a '$' that starts an expansion (not quoted by '' nor escaped).
  bool after_dollar() const { return m_after_dollar; }
  // How many `...` substitutions enclose this point (only unescaped ones are seen).
  int backquotes() const {
    return static_cast<int>(
        std::count_if(m_frames.begin(), m_frames.end(), [](const Frame& f) { return f.backquote; }));
  }

  void advance(char c) {
    const bool dollar = m_after_dollar;
    const char previous = m_previous;
    m_after_dollar = false;
    m_previous = c;
    if (m_state == '#') {
      if (c == '\n') {
        m_state = ' ';
      }
      return;
    }
    if (m_escaped) {
      m_escaped = false;
      return;
    }
    if (m_state == '\'') {
      if (c == '\'') {
        m_state = ' ';
      }
      return;
    }
    switch (c) {
    case '\\':
      m_escaped = true;
      break;
    case '$':
      m_after_dollar = true;
      break;
    case '#':
      if (m_state == ' ' && std::string_view(" \t\n;&|()").find(previous) != std::string_view::npos) {
        m_state = '#';
      }
      break;
    case '"':
      m_state = m_state == '"' ? ' ' : '"';
      break;
    case '\'':
      if (m_state == ' ') {
        m_state = '\'';
      }
      break;
    case '(':
      if (dollar) {
        // $( ... ) starts a fresh quoting context, even inside double quotes.
        m_frames.push_back({m_state, 0, false});
        m_state = ' ';
      } else if (m_state == ' ' && !m_frames.empty()) {
        ++m_frames.back().parens;
      }
      break;
    case ')':
      if (m_state == ' ' && !m_frames.empty()) {
        if (m_frames.back().parens > 0) {
          --m_frames.back().parens;
        } else if (!m_frames.back().backquote) {
          m_state = m_frames.back().state;
          m_frames.pop_back();
        }
      }
      break;
    case '`':
      if (m_state == ' ' && !m_frames.empty() && m_frames.back().backquote) {
        m_state = m_frames.back().state;
        m_frames.pop_back();
      } else {
        m_frames.push_back({m_state, 0, true});
        m_state = ' ';
      }
      break;
    default:
      break;
    }
  }

private:
  struct Frame {
    char state;
    int parens;
    bool backquote;
  };

  char m_state = ' ';
  bool m_escaped = false;
  bool m_after_dollar = false;
  // The character before, for telling a comment's "#" from one inside a word; the start counts as a blank.
  char m_previous = ' ';
  std::vector<Frame> m_frames;
};

// Inside `...` the shell first removes one level of \\, \` and \$, before it reads
// quotes; a ` in a quoted value would otherwise end the substitution.
std::string escape_for_backquotes(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '`' || c == '$') {
      out += '\\';
    }
    out += c;
  }
  return out;
}

std::optional<std::string> placeholder_value(std::string_view name, const CommandContext& context) {
  if (name == "url") {
    return context.url;
  }
  if (name == "port") {
    return std::to_string(context.port);
  }
  if (name == "variant") {
    return context.variant;
  }
  if (name == "model") {
    return context.model;
  }
  if (name == "host") {
    return context.host;
  }
  return std::nullopt;
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
    if (auto value = parse_number(at->get<std::string>())) {
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
  const std::string_view whole = trim(text);
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
      if (trim(line_text(lines[j])) == "}" && line_text(lines[j]).starts_with('}')) {
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
  if (auto value = parse_number(m[1].str())) {
    return *value;
  }
  return std::unexpected(fmt::format("matched \"{}\", not a number", clip(m[1].str())));
}

// The last lines of `text`, at most k_command_tail_bytes of them, starting at a line when it can.
std::string tail_of(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  std::size_t start = text.size() > k_command_tail_bytes ? text.size() - k_command_tail_bytes : 0;
  std::size_t lines = 0;
  for (std::size_t i = text.size(); i > start; --i) {
    if (text[i - 1] == '\n' && ++lines == k_command_tail_lines) {
      start = i;
      break;
    }
  }
  if (start > 0 && text[start - 1] != '\n') {
    const auto next = text.find('\n', start);
    if (next != std::string_view::npos) {
      start = next + 1;
    }
  }
  return std::string(text.substr(start));
}

std::string last_line(std::string_view text) {
  text = trim(text);
  const auto newline = text.find_last_of("\r\n");
  return clip(newline == std::string_view::npos ? text : text.substr(newline + 1));
}

} // namespace

std::string fill_command(const std::string& run, const CommandContext& context) {
  std::string out;
  QuoteTracker quotes;
  for (std::size_t i = 0; i < run.size(); ++i) {
    if (run[i] == '{' && i + 1 < run.size() && run[i + 1] == '{') {
      out += '{';
      quotes.advance('{');
      ++i;
      continue;
    }
    // An escaped "{" stays literal: a value after a backslash would lose its opening quote.
    // So does one in a comment: a newline in the value would end the comment.
    const bool literal = quotes.escaped() || quotes.state() == '#';
    const auto close = run[i] == '{' && !literal ? run.find('}', i) : std::string::npos;
    const auto value = close == std::string::npos
                           ? std::nullopt
                           : placeholder_value(std::string_view(run).substr(i + 1, close - i - 1), context);
    if (!value) {
      out += run[i];
      quotes.advance(run[i]);
      continue;
    }
    std::string quoted = util::shell_quote(*value);
    for (int level = 0; level < quotes.backquotes(); ++level) {
      quoted = escape_for_backquotes(quoted);
    }
    if (quotes.state() != ' ') {
      // Close the user's quotes, add the value, reopen them.
      out += quotes.state() + quoted + quotes.state();
    } else if (quotes.after_dollar()) {
      // "${model}": "$'" would start bash's $'...' quoting, which reads backslashes
      // in the value (dash prints a "$"). Escaping the "$" makes it a literal "$"
      // in every shell, with the value after it, as written.
      std::string dollar = "\\$";
      for (int level = 0; level < quotes.backquotes(); ++level) {
        dollar = escape_for_backquotes(dollar);
      }
      out.pop_back();
      out += dollar + quoted;
    } else {
      out += quoted;
    }
    quotes.advance('}');
    i = close;
  }
  return out;
}

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

std::expected<CommandOutcome, Error> run_command_benchmark(remote::Host& host, const experiment::BenchmarkSpec& spec,
                                                           const CommandContext& context, util::Duration timeout) {
  if (spec.kind != experiment::BenchmarkKind::command) {
    return std::unexpected(
        Error(fmt::format("benchmark \"{}\" is not a command benchmark", spec.name), ErrorKind::bad_input));
  }
  CommandOutcome outcome;
  outcome.command_line = fill_command(spec.run, context);
  const auto started = std::chrono::steady_clock::now();
  auto result = host.exec(outcome.command_line, timeout);
  outcome.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!result) {
    return std::unexpected(
        Error(fmt::format("benchmark \"{}\": {}", spec.name, result.error().what()), result.error().kind()));
  }
  outcome.exit_code = result->exit_code;
  outcome.timed_out = result->timed_out;
  outcome.out_tail = tail_of(result->out);
  outcome.err_tail = tail_of(result->err);
  if (outcome.timed_out) {
    outcome.problems.push_back(
        fmt::format("the command timed out after {} and was killed", util::format_duration(timeout)));
  } else if (outcome.exit_code != 0) {
    const std::string last = last_line(result->err);
    outcome.problems.push_back(last.empty()
                                   ? fmt::format("the command exited with status {}", outcome.exit_code)
                                   : fmt::format("the command exited with status {}: {}", outcome.exit_code, last));
  }
  outcome.metrics = extract_metrics(spec.extract, result->out, outcome.problems);
  return outcome;
}

} // namespace specctl::run
