#include <specctl/server/server_template.hpp>

#include "accept_source_parse.hpp"

#include <specctl/server/render.hpp>

#include <specctl/util/hash.hpp>
#include <specctl/util/text.hpp>
#include <specctl/util/yaml_field.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <regex>
#include <sstream>

namespace fs = std::filesystem;

namespace specctl::server {

namespace {

constexpr int k_max_extends_depth = 8;

const std::vector<std::string> k_template_keys = {
    "name",   "description",     "extends",           "command",       "default_port",
    "health", "version_command", "overridden_env",    "process_names", "knobs",
    "log",    "accept_length",   "telemetry_command", "dcgmi_command"};
const std::vector<std::string> k_knob_keys = {"type",       "help", "short", "min",  "max",    "choices", "flag",
                                              "flag_false", "json", "env",   "list", "derive", "since",   "before"};
const std::vector<std::string> k_log_keys = {"ready", "fatal", "progress", "milestones", "metrics"};
const std::vector<std::string> k_type_names = {"bool", "int", "float", "string", "choice", "list"};

// std::regex compiles (and matches) recursively, a stack frame or more per
// character of the pattern: a pattern far past any real one overflows the
// stack instead of failing (32000 nested parentheses did).
constexpr std::size_t k_max_pattern_length = 1000;

bool check_regex(const util::YamlField& field, const std::string& pattern) {
  if (pattern.size() > k_max_pattern_length) {
    field.error(
        fmt::format("regular expression too long ({} characters, at most {})", pattern.size(), k_max_pattern_length));
    return false;
  }
  try {
    std::regex compiled(pattern, std::regex::ECMAScript);
    return true;
  } catch (const std::regex_error& e) {
    field.error(fmt::format("invalid regular expression \"{}\": {}", pattern, e.what()));
    return false;
  }
}

void check_placeholders(const util::YamlField& field, const std::vector<std::string>& words) {
  const auto& known = command_placeholders();
  for (const auto& word : words) {
    for (auto open = word.find('{'); open != std::string::npos; open = word.find('{', open + 1)) {
      auto close = word.find('}', open);
      std::string name = close == std::string::npos ? "" : word.substr(open + 1, close - open - 1);
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        field.error(fmt::format("unknown placeholder \"{{{}}}\" in \"{}\"; known: {{model}}, {{listen}}, {{port}}, "
                                "{{specctl_bindir}}",
                                name, word));
      }
    }
  }
}

std::vector<std::string> read_patterns(const util::YamlField& field) {
  std::vector<std::string> out;
  if (!field.present()) {
    return out;
  }
  if (auto list = field.as_string_list()) {
    for (std::size_t i = 0; i < list->size(); ++i) {
      if (check_regex(field.items()[i], (*list)[i])) {
        out.push_back((*list)[i]);
      }
    }
  }
  return out;
}

KnobType parse_type(const std::string& name) {
  if (name == "bool") {
    return KnobType::boolean;
  }
  if (name == "int") {
    return KnobType::integer;
  }
  if (name == "float") {
    return KnobType::number;
  }
  if (name == "choice") {
    return KnobType::choice;
  }
  if (name == "list") {
    return KnobType::list;
  }
  return KnobType::string;
}

// A flag's words in a `since` rule: one word, or a list of words (bools only).
std::optional<std::vector<std::string>> read_flag_words(const util::YamlField& field, const KnobDef& knob) {
  if (field.is_list()) {
    auto words = field.as_string_list();
    if (words && knob.type != KnobType::boolean) {
      field.error("only a bool knob's flag can be several words; a valued flag is one word followed by the value");
      return std::nullopt;
    }
    return words;
  }
  auto word = field.as_string();
  if (!word) {
    return std::nullopt;
  }
  return std::vector<std::string>{*word};
}

// `since: {"0.5.16": {flag: --new-name}}` and `before: {"0.13.0": {path: old.key}}`: a knob's
// spellings by engine version (`key` names which), checked and sorted oldest first.
void read_versioned(const util::YamlField& field, const std::string& key, KnobDef& knob) {
  if (!field.expect_map()) {
    return;
  }
  field.check_duplicates();
  const bool flags = knob.flag || knob.flag_false;
  if (!flags && !knob.json_flag) {
    field.error(
        fmt::format("\"{}\" respells a flag or a JSON path: the knob needs flag, flag_false or json, not env", key));
    return;
  }
  auto& rules = key == "since" ? knob.since : knob.before;
  for (const auto& [version, version_at, rule] : field.entries()) {
    auto parts = parse_version(version);
    if (!parts || version.starts_with('v')) {
      field.diagnostics().error(
          version_at,
          fmt::format("{}: \"{}\" is not a version of dotted numbers, e.g. \"0.5.16\"", field.path(), version));
      continue;
    }
    if (!rule.expect_map()) {
      continue;
    }
    VersionedFlags spelling;
    spelling.since = version;
    spelling.since_parts = *parts;
    spelling.where = version_at;
    if (!flags) {
      rule.check_keys({"path"});
      if (!rule["path"].present()) {
        rule.error(fmt::format("a {} rule of a json knob needs path", key));
        continue;
      }
      spelling.json_path = rule["path"].as_string();
      if (!spelling.json_path) {
        continue;
      }
      rules.push_back(std::move(spelling));
      continue;
    }
    rule.check_keys({"flag", "flag_false"});
    if (auto flag = rule["flag"]; flag.present()) {
      spelling.flag = read_flag_words(flag, knob);
      if (knob.type != KnobType::boolean && spelling.flag && spelling.flag->size() != 1) {
        flag.error("a valued knob's flag is one word");
        spelling.flag.reset();
      }
    }
    if (auto flag = rule["flag_false"]; flag.present()) {
      if (knob.type != KnobType::boolean) {
        flag.error("only a bool knob can have flag_false");
      } else {
        spelling.flag_false = read_flag_words(flag, knob);
      }
    }
    if (!rule["flag"].present() && !rule["flag_false"].present()) {
      rule.error(fmt::format("a {} rule needs flag or flag_false", key));
      continue;
    }
    if (!spelling.flag && !spelling.flag_false) {
      continue;
    }
    rules.push_back(std::move(spelling));
  }
  std::stable_sort(rules.begin(), rules.end(), [](const VersionedFlags& a, const VersionedFlags& b) {
    return compare_versions(a.since_parts, b.since_parts) < 0;
  });
}

void read_knob(const util::YamlField& field, const std::string& name, KnobDef& knob) {
  knob.name = name;
  knob.where = field.location();
  if (!field.expect_map()) {
    return;
  }
  field.check_keys(k_knob_keys);
  if (auto type = field["type"]; type.present()) {
    if (auto t = type.as_choice(k_type_names)) {
      knob.type = parse_type(*t);
    }
  } else {
    field.error("missing \"type\" (one of bool, int, float, string, choice, list)");
  }
  if (auto help = field["help"]; help.present()) {
    knob.help = help.as_string().value_or("");
  }
  knob.short_name = field["short"].present() ? field["short"].as_string().value_or(name) : name;
  if (auto min = field["min"]; min.present()) {
    knob.min = min.as_number();
  }
  if (auto max = field["max"]; max.present()) {
    knob.max = max.as_number();
  }
  if (auto choices = field["choices"]; choices.present()) {
    if (choices.is_list()) {
      for (const auto& c : choices.as_string_list().value_or(std::vector<std::string>{})) {
        knob.choices.emplace_back(c, c);
      }
    } else if (choices.is_map()) {
      for (const auto& [user, user_at, rendered] : choices.entries()) {
        knob.choices.emplace_back(user, rendered.as_string().value_or(user));
      }
    } else {
      choices.error("expected a list of values or a map of value: rendered value");
    }
  }
  if (knob.type == KnobType::choice && knob.choices.empty()) {
    field.error("a choice knob needs \"choices\"");
  }
  if (auto flag = field["flag"]; flag.present()) {
    knob.flag = flag.as_string();
  }
  if (auto flag = field["flag_false"]; flag.present()) {
    knob.flag_false = flag.as_string();
    if (knob.type != KnobType::boolean) {
      flag.error("only a bool knob can have flag_false");
    }
  }
  if (auto json = field["json"]; json.present() && json.expect_map()) {
    json.check_keys({"flag", "path"});
    knob.json_flag = json["flag"].as_string();
    knob.json_path = json["path"].as_string().value_or("");
  }
  if (auto env = field["env"]; env.present()) {
    knob.env = env.as_string();
  }
  if (auto list = field["list"]; list.present()) {
    auto style = list.as_choice({"spread", "repeat", "comma"}).value_or("spread");
    knob.list_style = style == "repeat" ? ListStyle::repeat : style == "comma" ? ListStyle::comma : ListStyle::spread;
  }
  if (auto derive = field["derive"]; derive.present() && derive.expect_map()) {
    derive.check_keys({"from", "add"});
    knob.derive_from = derive["from"].as_string();
    knob.derive_add = derive["add"].present() ? derive["add"].as_int(-1000, 1000).value_or(0) : 0;
  }
  int ways = (knob.flag || knob.flag_false ? 1 : 0) + (knob.json_flag ? 1 : 0) + (knob.env ? 1 : 0);
  if (ways != 1) {
    field.error("a knob needs exactly one of flag/flag_false, json or env");
  }
  for (const char* key : {"since", "before"}) {
    if (auto rules = field[key]; rules.present()) {
      read_versioned(rules, key, knob);
    }
  }
  if (!knob.since.empty() && !knob.before.empty()) {
    field.error("a knob has since or before rules, not both");
  }
}

void read_log(const util::YamlField& field, LogPatterns& log) {
  if (!field.expect_map()) {
    return;
  }
  field.check_keys(k_log_keys);
  if (field["ready"].present()) {
    log.ready = read_patterns(field["ready"]);
  }
  if (field["fatal"].present()) {
    log.fatal = read_patterns(field["fatal"]);
  }
  if (field["milestones"].present()) {
    log.milestones = read_patterns(field["milestones"]);
  }
  if (auto progress = field["progress"]; progress.present() && progress.expect_map()) {
    progress.check_keys({"pattern", "percent", "done", "total"});
    ProgressPattern p;
    p.pattern = progress["pattern"].as_string().value_or("");
    check_regex(progress["pattern"], p.pattern);
    auto group = [&](const char* key) {
      return progress[key].present() ? static_cast<int>(progress[key].as_int(0, 9).value_or(0)) : 0;
    };
    p.percent_group = group("percent");
    p.done_group = group("done");
    p.total_group = group("total");
    log.progress = p;
  }
  if (auto metrics = field["metrics"]; metrics.present() && metrics.expect_map()) {
    log.metrics.clear();
    for (const auto& [name, name_at, pattern] : metrics.entries()) {
      if (auto text = pattern.as_string(); text && check_regex(pattern, *text)) {
        log.metrics.emplace_back(name, *text);
      }
    }
  }
}

bool is_template_path(const std::string& name_or_path) {
  return name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".yaml");
}

// A path is relative to the file that names it (the experiment file, or the template
// that extends it), as `templates/` is found next to the experiment file; named on the
// command line (no file), to the working directory.
fs::path template_path(const std::string& path, const std::string& named_in) {
  fs::path p = path;
  return (p.is_relative() && !named_in.empty() ? fs::path(named_in).parent_path() / p : p).lexically_normal();
}

std::optional<std::string> find_template_file(const std::string& name_or_path,
                                              const std::vector<std::string>& search_path,
                                              const std::string& named_in) {
  if (is_template_path(name_or_path)) {
    auto path = template_path(name_or_path, named_in);
    std::error_code ec;
    return fs::is_regular_file(path, ec) ? std::optional(path.string()) : std::nullopt;
  }
  for (const auto& dir : search_path) {
    fs::path candidate = fs::path(dir) / (name_or_path + ".yaml");
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec)) {
      return candidate.string();
    }
  }
  return std::nullopt;
}

// Paths under the working directory are shown relative to it, so plans read the same on every machine.
std::string display_path(const std::string& path) {
  std::error_code ec;
  fs::path absolute = fs::weakly_canonical(path, ec);
  fs::path cwd = fs::current_path(ec);
  if (!ec) {
    auto rel = absolute.lexically_relative(cwd);
    if (!rel.empty() && *rel.begin() != "..") {
      return rel.string();
    }
  }
  return absolute.string();
}

std::shared_ptr<ServerTemplate> load_recursive(const std::string& name_or_path,
                                               const std::vector<std::string>& search_path, util::Diagnostics& diag,
                                               const util::Location& asked_at, int depth) {
  auto file = find_template_file(name_or_path, search_path, asked_at.file);
  if (!file && is_template_path(name_or_path)) {
    diag.error(asked_at, fmt::format("template file \"{}\" not found: no file {}", name_or_path,
                                     template_path(name_or_path, asked_at.file).string()));
    return nullptr;
  }
  if (!file) {
    auto names = available_templates(search_path);
    diag.error(asked_at, fmt::format("unknown template \"{}\"{}; available: {}", name_or_path,
                                     util::did_you_mean(name_or_path, names), util::join(names, ", ")));
    return nullptr;
  }
  std::string shown = display_path(*file);
  std::size_t errors_before = diag.error_count();
  std::string text;
  YAML::Node root = util::load_yaml_file(*file, shown, diag, &text);
  if (!root.IsDefined()) {
    return nullptr;
  }
  util::YamlField top(root, "", shown, diag);
  if (!top.expect_map()) {
    return nullptr;
  }
  top.check_keys(k_template_keys);

  std::shared_ptr<ServerTemplate> tmpl;
  if (auto extends = top["extends"]; extends.present()) {
    if (depth >= k_max_extends_depth) {
      extends.error("templates extend each other too deeply (a cycle?)");
      return nullptr;
    }
    if (auto parent_name = extends.as_string()) {
      tmpl = load_recursive(*parent_name, search_path, diag, extends.location(), depth + 1);
    }
    if (!tmpl) {
      return nullptr;
    }
  } else {
    tmpl = std::make_shared<ServerTemplate>();
  }
  tmpl->file = shown;
  tmpl->content_hash = util::fingerprint(tmpl->content_hash + text);
  if (auto name = top["name"]; name.present()) {
    tmpl->name = name.as_string().value_or("");
  } else {
    tmpl->name = fs::path(*file).stem().string();
  }
  if (auto description = top["description"]; description.present()) {
    tmpl->description = description.as_string().value_or("");
  }
  if (auto command = top["command"]; command.present()) {
    tmpl->command = command.as_string_list().value_or(std::vector<std::string>{});
    if (tmpl->command.empty()) {
      command.error("the command needs at least one word");
    }
    check_placeholders(command, tmpl->command);
  } else if (tmpl->command.empty()) {
    top.error("missing \"command\"");
  }
  if (auto port = top["default_port"]; port.present()) {
    tmpl->default_port = static_cast<int>(port.as_int(1, 65535).value_or(tmpl->default_port));
  }
  if (auto health = top["health"]; health.present() && health.expect_map()) {
    health.check_keys({"path"});
    tmpl->health_path = health["path"].as_string().value_or("/health");
  }
  if (auto version = top["version_command"]; version.present()) {
    tmpl->version_command = version.as_string_list().value_or(std::vector<std::string>{});
  }
  if (auto telemetry = top["telemetry_command"]; telemetry.present()) {
    tmpl->telemetry_command = telemetry.as_string_list().value_or(std::vector<std::string>{});
    check_placeholders(telemetry, tmpl->telemetry_command);
  }
  if (auto dcgmi = top["dcgmi_command"]; dcgmi.present()) {
    tmpl->dcgmi_command = dcgmi.as_string_list().value_or(std::vector<std::string>{});
    check_placeholders(dcgmi, tmpl->dcgmi_command);
  }
  if (auto env = top["overridden_env"]; env.present()) {
    tmpl->overridden_env = env.as_string_list().value_or(std::vector<std::string>{});
  }
  if (auto names = top["process_names"]; names.present()) {
    tmpl->process_names = names.as_string_list().value_or(std::vector<std::string>{});
  }
  if (auto knobs = top["knobs"]; knobs.present() && knobs.expect_map()) {
    knobs.check_duplicates();
    for (const auto& [name, name_at, field] : knobs.entries()) {
      KnobDef knob;
      read_knob(field, name, knob);
      auto existing =
          std::find_if(tmpl->knobs.begin(), tmpl->knobs.end(), [&](const KnobDef& k) { return k.name == name; });
      if (existing != tmpl->knobs.end()) {
        *existing = std::move(knob);
      } else {
        tmpl->knobs.push_back(std::move(knob));
      }
    }
  }
  for (const auto& knob : tmpl->knobs) {
    if (knob.derive_from && !tmpl->find_knob(*knob.derive_from)) {
      diag.error(knob.where, fmt::format("knobs.{}: derive.from names no knob \"{}\"", knob.name, *knob.derive_from));
    }
  }
  if (auto log = top["log"]; log.present()) {
    read_log(log, tmpl->log);
  }
  if (auto sources = top["accept_length"]; sources.present()) {
    std::vector<std::string> metric_names;
    for (const auto& [name, pattern] : tmpl->log.metrics) {
      metric_names.push_back(name);
    }
    tmpl->accept_length = detail::parse_accept_sources(sources, metric_names);
  }
  if (diag.error_count() > errors_before) {
    return nullptr;
  }
  return tmpl;
}

} // namespace

const KnobDef* ServerTemplate::find_knob(const std::string& knob_name) const {
  auto it = std::find_if(knobs.begin(), knobs.end(), [&](const KnobDef& k) { return k.name == knob_name; });
  return it == knobs.end() ? nullptr : &*it;
}

std::vector<std::string> ServerTemplate::knob_names() const {
  std::vector<std::string> out;
  for (const auto& k : knobs) {
    out.push_back(k.name);
  }
  return out;
}

std::vector<std::string> template_search_path(const std::string& experiment_dir) {
  std::vector<std::string> out;
  out.push_back((fs::path(experiment_dir.empty() ? "." : experiment_dir) / "templates").string());
  if (const char* env = std::getenv("SPECCTL_TEMPLATE_PATH"); env != nullptr && *env != '\0') {
    std::stringstream parts(env);
    std::string part;
    while (std::getline(parts, part, ':')) {
      if (!part.empty()) {
        out.push_back(part);
      }
    }
  }
  if (const char* config = std::getenv("XDG_CONFIG_HOME"); config != nullptr && *config != '\0') {
    out.push_back((fs::path(config) / "specctl" / "templates").string());
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    out.push_back((fs::path(home) / ".config" / "specctl" / "templates").string());
  }
  std::error_code ec;
  if (fs::is_directory(SPECCTL_SOURCE_TEMPLATES, ec)) {
    out.emplace_back(SPECCTL_SOURCE_TEMPLATES);
  } else {
    out.emplace_back(SPECCTL_INSTALLED_TEMPLATES);
  }
  return out;
}

std::vector<std::string> available_templates(const std::vector<std::string>& search_path) {
  std::vector<std::string> names;
  for (const auto& dir : search_path) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().extension() == ".yaml") {
        names.push_back(it->path().stem().string());
      }
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::shared_ptr<const ServerTemplate> load_template(const std::string& name_or_path,
                                                    const std::vector<std::string>& search_path,
                                                    util::Diagnostics& diag, const util::Location& asked_at) {
  return load_recursive(name_or_path, search_path, diag, asked_at, 0);
}

} // namespace specctl::server
