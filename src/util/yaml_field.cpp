#include <specctl/util/bounded_read.hpp>
#include <specctl/util/yaml_field.hpp>

#include <specctl/util/parse.hpp>
#include <specctl/util/size.hpp>
#include <specctl/util/text.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>

namespace specctl::util {

namespace {

// yaml-cpp tags quoted scalars "!" and plain ones "?": a quoted "8" is a string.
bool is_quoted(const YAML::Node& node) {
  return node.Tag() == "!";
}

std::string quoted_value(const YAML::Node& node) {
  std::string text = node.Scalar();
  if (text.size() > 60) {
    text = text.substr(0, 57) + "...";
  }
  std::string escaped;
  for (char c : text) {
    if (c == '\n') {
      escaped += "\\n";
    } else if (c == '"') {
      escaped += "\\\"";
    } else {
      escaped += c;
    }
  }
  return fmt::format("\"{}\"", escaped);
}

// Walks the document once, as its readers will: an alias is followed wherever it is
// used, so a document whose expansion is far larger than its text (a billion laughs,
// one long string aliased a thousand times) is refused before anything copies it. A
// NUL byte in a key or value ("\0") is refused where it stands: no command line, file
// name or environment can hold one.
constexpr std::size_t k_max_expanded_nodes = 1'000'000;
constexpr std::size_t k_max_expanded_bytes = 64 << 20;

bool check_expansion(const YAML::Node& root, const std::string& file, Diagnostics& diag) {
  std::vector<YAML::Node> todo{root};
  std::size_t nodes = 0;
  std::size_t bytes = 0;
  while (!todo.empty()) {
    YAML::Node node = todo.back();
    todo.pop_back();
    if (++nodes > k_max_expanded_nodes || bytes > k_max_expanded_bytes) {
      diag.error(location_of(node.Mark(), file),
                 fmt::format("the document expands to more than {} values or {} (its aliases repeat what they "
                             "name): refused",
                             k_max_expanded_nodes, format_bytes(k_max_expanded_bytes)));
      return false;
    }
    if (node.IsScalar()) {
      const std::string& scalar = node.Scalar();
      bytes += scalar.size();
      if (scalar.find('\0') != std::string::npos) {
        diag.error(location_of(node.Mark(), file), "a NUL byte (\\0) in a value: no command line, file name or "
                                                   "environment can hold one");
        return false;
      }
    } else if (node.IsSequence()) {
      for (const auto& item : node) {
        todo.push_back(item);
      }
    } else if (node.IsMap()) {
      for (const auto& entry : node) {
        todo.push_back(entry.first);
        todo.push_back(entry.second);
      }
    }
  }
  return true;
}

} // namespace

Location location_of(const YAML::Mark& mark, const std::string& file, const Location& fallback) {
  if (mark.line < 0 || mark.is_null()) {
    return fallback.file.empty() ? Location{file, 0, 0} : fallback;
  }
  return Location{file, mark.line + 1, mark.column + 1};
}

YAML::Node load_yaml_file(const std::string& path, const std::string& display_name, Diagnostics& diag,
                          std::string* text_out) {
  auto read = read_regular_file(path, k_max_yaml_bytes, "a YAML file of specctl's");
  if (!read) {
    diag.error(Location{display_name}, fmt::format("cannot read file: {}", read.error().reason));
    return YAML::Node(YAML::NodeType::Undefined);
  }
  std::string text = std::move(*read);
  if (text_out != nullptr) {
    *text_out = text;
  }
  if (text.find('\0') != std::string::npos) {
    diag.error(Location{display_name}, "not a YAML file (it contains NUL bytes)");
    return YAML::Node(YAML::NodeType::Undefined);
  }
  // Every value may end up in JSON (plans, results, JSON-valued flags), which
  // must be UTF-8: refuse other bytes here, where the place can be named.
  if (auto bad = invalid_utf8_at(text)) {
    const std::string_view before = std::string_view(text).substr(0, *bad);
    const auto newline = before.rfind('\n');
    const int line = 1 + static_cast<int>(std::count(before.begin(), before.end(), '\n'));
    const int column = 1 + static_cast<int>(newline == std::string_view::npos ? *bad : *bad - newline - 1);
    diag.error(
        Location{display_name, line, column},
        fmt::format("not UTF-8 text (byte 0x{:02X}): save the file as UTF-8", static_cast<unsigned char>(text[*bad])));
    return YAML::Node(YAML::NodeType::Undefined);
  }
  try {
    YAML::Node root = YAML::Load(text);
    if (!root.IsDefined() || root.IsNull()) {
      diag.error(Location{display_name}, "the file is empty");
      return YAML::Node(YAML::NodeType::Undefined);
    }
    if (!check_expansion(root, display_name, diag)) {
      return YAML::Node(YAML::NodeType::Undefined);
    }
    return root;
  } catch (const YAML::Exception& e) {
    diag.error(location_of(e.mark, display_name), fmt::format("not valid YAML: {}", e.msg));
    return YAML::Node(YAML::NodeType::Undefined);
  }
}

YamlField::YamlField(YAML::Node node, std::string path, std::string file, Diagnostics& diag, Location fallback)
    : m_node(std::move(node)), m_path(std::move(path)), m_file(std::move(file)), m_diag(&diag),
      m_fallback(std::move(fallback)) {}

YamlField& YamlField::operator=(const YamlField& other) {
  if (this != &other) {
    m_node.reset(other.m_node);
    m_path = other.m_path;
    m_file = other.m_file;
    m_diag = other.m_diag;
    m_fallback = other.m_fallback;
  }
  return *this;
}

YamlField& YamlField::operator=(YamlField&& other) {
  return *this = static_cast<const YamlField&>(other);
}

Location YamlField::location() const {
  if (!m_node.IsDefined()) {
    return m_fallback.file.empty() ? Location{m_file} : m_fallback;
  }
  return location_of(m_node.Mark(), m_file, m_fallback);
}

bool YamlField::present() const {
  return m_node.IsDefined() && !m_node.IsNull();
}

std::string YamlField::describe_kind() const {
  if (!m_node.IsDefined() || m_node.IsNull()) {
    return "nothing";
  }
  if (m_node.IsMap()) {
    return "a map";
  }
  if (m_node.IsSequence()) {
    return "a list";
  }
  return quoted_value(m_node);
}

void YamlField::error(const std::string& message) const {
  m_diag->error(location(), m_path.empty() ? message : fmt::format("{}: {}", m_path, message));
}

void YamlField::warning(const std::string& message) const {
  m_diag->warning(location(), m_path.empty() ? message : fmt::format("{}: {}", m_path, message));
}

bool YamlField::expect_map() const {
  if (m_node.IsMap()) {
    return true;
  }
  error(fmt::format("expected a map, got {}", describe_kind()));
  return false;
}

bool YamlField::expect_list() const {
  if (m_node.IsSequence()) {
    return true;
  }
  error(fmt::format("expected a list, got {}", describe_kind()));
  return false;
}

bool YamlField::expect_scalar() const {
  if (m_node.IsScalar()) {
    return true;
  }
  error(fmt::format("expected a single value, got {}", describe_kind()));
  return false;
}

std::string YamlField::child_path(const std::string& key) const {
  return m_path.empty() ? key : m_path + "." + key;
}

YamlField YamlField::operator[](const std::string& key) const {
  YAML::Node child(YAML::NodeType::Undefined);
  Location key_location = location();
  if (m_node.IsMap()) {
    for (const auto& entry : m_node) {
      if (entry.first.IsScalar() && entry.first.Scalar() == key) {
        child.reset(entry.second);
        key_location = location_of(entry.first.Mark(), m_file, key_location);
        break;
      }
    }
  }
  // A null value has no useful mark of its own: point at its key instead.
  Location fallback = key_location;
  return YamlField(child, child_path(key), m_file, *m_diag, fallback);
}

std::vector<YamlField> YamlField::items() const {
  std::vector<YamlField> out;
  if (!m_node.IsSequence()) {
    return out;
  }
  for (std::size_t i = 0; i < m_node.size(); ++i) {
    out.emplace_back(m_node[i], fmt::format("{}[{}]", m_path, i), m_file, *m_diag, location());
  }
  return out;
}

std::vector<YamlEntry> YamlField::entries() const {
  std::vector<YamlEntry> out;
  if (!m_node.IsMap()) {
    return out;
  }
  for (const auto& entry : m_node) {
    std::string key = entry.first.IsScalar() ? entry.first.Scalar() : std::string();
    Location key_location = location_of(entry.first.Mark(), m_file, location());
    out.push_back(
        YamlEntry{key, key_location, YamlField(entry.second, child_path(key), m_file, *m_diag, key_location)});
  }
  return out;
}

void YamlField::check_duplicates() const {
  if (!m_node.IsMap()) {
    return;
  }
  std::set<std::string> seen;
  for (const auto& entry : m_node) {
    if (entry.first.IsScalar() && !seen.insert(entry.first.Scalar()).second) {
      m_diag->error(location_of(entry.first.Mark(), m_file, location()),
                    fmt::format("duplicate key \"{}\" in {}", entry.first.Scalar(), m_path));
    }
  }
}

void YamlField::check_keys(const std::vector<std::string>& allowed) const {
  if (!m_node.IsMap()) {
    return;
  }
  std::set<std::string> seen;
  for (const auto& entry : m_node) {
    Location at = location_of(entry.first.Mark(), m_file, location());
    if (!entry.first.IsScalar()) {
      m_diag->error(at, fmt::format("{}: keys must be plain words", m_path.empty() ? "top level" : m_path));
      continue;
    }
    const std::string& key = entry.first.Scalar();
    std::string where = m_path.empty() ? "" : fmt::format(" in {}", m_path);
    if (!seen.insert(key).second) {
      m_diag->error(at, fmt::format("duplicate key \"{}\"{}", key, where));
      continue;
    }
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      m_diag->error(at, fmt::format("unknown key \"{}\"{}{}", key, where, did_you_mean(key, allowed)));
    }
  }
}

std::optional<std::string> YamlField::as_string() const {
  if (!expect_scalar()) {
    return std::nullopt;
  }
  return m_node.Scalar();
}

std::optional<std::int64_t> YamlField::as_int(std::int64_t min, std::int64_t max) const {
  if (!expect_scalar()) {
    return std::nullopt;
  }
  const auto value = is_quoted(m_node) ? std::nullopt : parse_number<std::int64_t>(m_node.Scalar());
  if (!value) {
    error(fmt::format("expected an integer, got {}", quoted_value(m_node)));
    return std::nullopt;
  }
  if (*value < min || *value > max) {
    error(fmt::format("{} is out of range ({}..{})", *value, min, max));
    return std::nullopt;
  }
  return value;
}

std::optional<double> YamlField::as_number() const {
  if (!expect_scalar()) {
    return std::nullopt;
  }
  const auto value = is_quoted(m_node) ? std::nullopt : parse_number<double>(m_node.Scalar());
  if (!value || !std::isfinite(*value)) {
    error(fmt::format("expected a number, got {}", quoted_value(m_node)));
    return std::nullopt;
  }
  return value;
}

std::optional<bool> YamlField::as_bool() const {
  if (!expect_scalar()) {
    return std::nullopt;
  }
  const std::string& text = m_node.Scalar();
  if (!is_quoted(m_node)) {
    if (text == "true" || text == "True" || text == "yes" || text == "on") {
      return true;
    }
    if (text == "false" || text == "False" || text == "no" || text == "off") {
      return false;
    }
  }
  error(fmt::format("expected true or false, got {}", quoted_value(m_node)));
  return std::nullopt;
}

std::optional<Duration> YamlField::as_duration() const {
  if (!expect_scalar()) {
    return std::nullopt;
  }
  auto parsed = parse_duration(m_node.Scalar());
  if (!parsed) {
    error(parsed.error());
    return std::nullopt;
  }
  return *parsed;
}

std::optional<std::uint64_t> YamlField::as_size_mib() const {
  if (!expect_scalar()) {
    return std::nullopt;
  }
  auto parsed = parse_size_mib(m_node.Scalar());
  if (!parsed) {
    error(parsed.error());
    return std::nullopt;
  }
  return *parsed;
}

std::optional<double> YamlField::as_percent() const {
  if (!expect_scalar()) {
    return std::nullopt;
  }
  std::string text = m_node.Scalar();
  if (!text.empty() && text.back() == '%') {
    text.pop_back();
  }
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 0 || value > 1000) {
    error(fmt::format("expected a percentage such as 10%, got {}", quoted_value(m_node)));
    return std::nullopt;
  }
  return value;
}

std::optional<std::string> YamlField::as_choice(const std::vector<std::string>& choices) const {
  auto value = as_string();
  if (!value) {
    return std::nullopt;
  }
  if (std::find(choices.begin(), choices.end(), *value) == choices.end()) {
    error(fmt::format("\"{}\" is not one of {}{}", *value, join(choices, ", "), did_you_mean(*value, choices)));
    return std::nullopt;
  }
  return value;
}

std::optional<std::vector<std::string>> YamlField::as_string_list() const {
  if (!expect_list()) {
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (const auto& item : items()) {
    auto value = item.as_string();
    ok = ok && value.has_value();
    if (value) {
      out.push_back(*value);
    }
  }
  return ok ? std::optional(out) : std::nullopt;
}

} // namespace specctl::util
