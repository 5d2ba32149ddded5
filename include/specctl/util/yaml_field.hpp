#pragma once

#include <specctl/util/diagnostics.hpp>
#include <specctl/util/duration.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <yaml-cpp/yaml.h>

namespace specctl::util {

// Loads a YAML file, reporting an unreadable, empty or malformed file as a diagnostic.
// Returns an undefined node on failure.
// The file's text is stored in `text` when given, e.g. to fingerprint it.
YAML::Node load_yaml_file(const std::string& path, const std::string& display_name, Diagnostics& diag,
                          std::string* text = nullptr);

// A YAML node seen with its key path ("server.knobs.tp") and file, so every
// conversion can report a mistake as `file:line:col: path: message` and carry on.
struct YamlEntry;

class YamlField {
public:
  YamlField(YAML::Node node, std::string path, std::string file, Diagnostics& diag, Location fallback = {});
  YamlField(const YamlField&) = default;
  YamlField(YamlField&&) = default;
  // yaml-cpp's Node::operator= writes through to the node it refers to (changing
  // every other handle to it); assigning a YamlField must only rebind.
  YamlField& operator=(const YamlField& other);
  YamlField& operator=(YamlField&& other);
  ~YamlField() = default;

  const YAML::Node& node() const { return m_node; }
  const std::string& path() const { return m_path; }
  Location location() const;

  // Defined and not null.
  bool present() const;
  bool is_map() const { return m_node.IsMap(); }
  bool is_list() const { return m_node.IsSequence(); }
  bool is_scalar() const { return m_node.IsScalar(); }

  // Report "expected a map, got a list" (etc.) and return false when the kind is wrong.
  bool expect_map() const;
  bool expect_list() const;
  bool expect_scalar() const;

  YamlField operator[](const std::string& key) const;
  std::vector<YamlField> items() const;
  // Map entries in file order.
  std::vector<YamlEntry> entries() const;

  // Reports keys not in `allowed` (with a did-you-mean) and keys given twice.
  void check_keys(const std::vector<std::string>& allowed) const;
  // Reports keys given twice, for maps whose keys are the user's own (env, knobs).
  void check_duplicates() const;

  std::optional<std::string> as_string() const;
  std::optional<std::int64_t> as_int(std::int64_t min, std::int64_t max) const;
  std::optional<double> as_number() const;
  std::optional<bool> as_bool() const;
  std::optional<Duration> as_duration() const;
  std::optional<std::uint64_t> as_size_mib() const;
  // A percentage such as "10%" or 10, as 10.0.
  std::optional<double> as_percent() const;
  std::optional<std::string> as_choice(const std::vector<std::string>& choices) const;
  std::optional<std::vector<std::string>> as_string_list() const;

  void error(const std::string& message) const;
  void warning(const std::string& message) const;
  Diagnostics& diagnostics() const { return *m_diag; }
  const std::string& file() const { return m_file; }

private:
  std::string describe_kind() const;
  std::string child_path(const std::string& key) const;

  YAML::Node m_node;
  std::string m_path;
  std::string m_file;
  Diagnostics* m_diag;
  Location m_fallback;
};

struct YamlEntry {
  std::string key;
  Location key_at;
  YamlField value;
};

// Location of a yaml-cpp mark (0-based) in a file (1-based), or `fallback` when the mark is unknown.
Location location_of(const YAML::Mark& mark, const std::string& file, const Location& fallback = {});

} // namespace specctl::util
