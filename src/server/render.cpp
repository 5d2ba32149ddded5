#include <specctl/server/render.hpp>

#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace specctl::server {

namespace {

std::string scalar_text(const nlohmann::json& value) {
  if (value.is_string()) {
    return value.get<std::string>();
  }
  if (value.is_boolean()) {
    return value.get<bool>() ? "true" : "false";
  }
  return value.dump();
}

std::string rendered_choice(const KnobDef& def, const nlohmann::json& value) {
  std::string user = scalar_text(value);
  for (const auto& [name, rendered] : def.choices) {
    if (name == user) {
      return rendered;
    }
  }
  return user;
}

// The value as it goes into a JSON-valued flag: numbers and booleans stay typed.
nlohmann::ordered_json json_value(const KnobDef& def, const nlohmann::json& value) {
  if (def.type == KnobType::choice) {
    return rendered_choice(def, value);
  }
  return nlohmann::ordered_json(value);
}

void set_path(nlohmann::ordered_json& root, const std::string& dotted, nlohmann::ordered_json value) {
  nlohmann::ordered_json* node = &root;
  std::size_t start = 0;
  while (true) {
    auto dot = dotted.find('.', start);
    std::string key = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (dot == std::string::npos) {
      (*node)[key] = std::move(value);
      return;
    }
    node = &(*node)[key];
    start = dot + 1;
  }
}

std::string substitute(const std::string& word, const ServerConfig& config, const RenderOptions& options) {
  std::string out;
  for (std::size_t i = 0; i < word.size(); ++i) {
    if (word[i] != '{') {
      out += word[i];
      continue;
    }
    auto end = word.find('}', i);
    std::string name = end == std::string::npos ? "" : word.substr(i + 1, end - i - 1);
    if (name == "model") {
      out += config.model;
    } else if (name == "listen") {
      out += config.listen;
    } else if (name == "port") {
      out += std::to_string(config.port);
    } else if (name == "specctl_bindir") {
      out += options.specctl_bindir;
    } else {
      out += word[i];
      continue;
    }
    i = end;
  }
  return out;
}

// The words a knob renders with (or its JSON path), after its `since`/`before` rules for
// the engine version.
struct Spelling {
  std::vector<std::string> flag;
  std::vector<std::string> flag_false;
  std::string json_path;
};

void respell(Spelling& out, const VersionedFlags& rule) {
  if (rule.flag) {
    out.flag = *rule.flag;
  }
  if (rule.flag_false) {
    out.flag_false = *rule.flag_false;
  }
  if (rule.json_path) {
    out.json_path = *rule.json_path;
  }
}

Spelling spelling_for(const KnobDef& def, const std::optional<std::vector<long>>& version) {
  Spelling out;
  if (def.flag) {
    out.flag = {*def.flag};
  }
  if (def.flag_false) {
    out.flag_false = {*def.flag_false};
  }
  out.json_path = def.json_path;
  if (!version) {
    return out;
  }
  // `since`: every rule the version has reached, the newest last.
  for (const auto& rule : def.since) {
    if (compare_versions(*version, rule.since_parts) < 0) {
      break;
    }
    respell(out, rule);
  }
  // `before`: the lowest bound the version is still below.
  for (const auto& rule : def.before) {
    if (compare_versions(*version, rule.since_parts) < 0) {
      respell(out, rule);
      break;
    }
  }
  return out;
}

} // namespace

std::optional<std::vector<long>> parse_version(std::string_view text) {
  if (!text.empty() && (text.front() == 'v' || text.front() == 'V')) {
    text.remove_prefix(1);
  }
  std::vector<long> parts;
  while (!text.empty() && std::isdigit(static_cast<unsigned char>(text.front())) != 0) {
    long part = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), part);
    if (ec != std::errc()) {
      break;
    }
    parts.push_back(part);
    text.remove_prefix(static_cast<std::size_t>(end - text.data()));
    // "0.5.10.post1" and "0.11.0rc2" stop at the first part that is not a number.
    if (text.size() < 2 || text.front() != '.') {
      break;
    }
    text.remove_prefix(1);
  }
  if (parts.empty()) {
    return std::nullopt;
  }
  return parts;
}

int compare_versions(const std::vector<long>& a, const std::vector<long>& b) {
  for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    long x = i < a.size() ? a[i] : 0;
    long y = i < b.size() ? b[i] : 0;
    if (x != y) {
      return x < y ? -1 : 1;
    }
  }
  return 0;
}

const std::vector<std::string>& command_placeholders() {
  static const std::vector<std::string> names = {"model", "listen", "port", "specctl_bindir"};
  return names;
}

std::string LaunchCommand::shell_line() const {
  std::vector<std::string> parts;
  for (const auto& [name, value] : env) {
    parts.push_back(name + "=" + util::shell_quote(value));
  }
  parts.push_back(util::shell_join(argv));
  return util::join(parts, " ");
}

LaunchCommand render_launch(const ServerConfig& config, const RenderOptions& options) {
  LaunchCommand out;
  const ServerTemplate& tmpl = *config.tmpl;
  for (const auto& word : tmpl.command) {
    out.argv.push_back(substitute(word, config, options));
  }
  for (const auto& word : tmpl.telemetry_command) {
    out.telemetry.push_back(substitute(word, config, options));
  }
  for (const auto& word : tmpl.dcgmi_command) {
    out.dcgmi.push_back(substitute(word, config, options));
  }
  std::optional<std::vector<long>> version;
  // Only a template with `since`/`before` rules reads the version (llama-server's is not a dotted number).
  const bool versioned =
      std::any_of(tmpl.knobs.begin(), tmpl.knobs.end(), [](const KnobDef& k) { return k.versioned(); });
  if (versioned && options.engine_version && !util::trim(*options.engine_version).empty()) {
    version = parse_version(util::trim(*options.engine_version));
    if (!version) {
      out.warnings.push_back(fmt::format("{} version \"{}\" is not a dotted number: flags use the template's base "
                                         "spelling",
                                         tmpl.name, *options.engine_version));
    }
  }
  std::vector<std::pair<std::string, nlohmann::ordered_json>> json_flags;
  std::vector<std::pair<std::string, std::string>> knob_env;
  for (const auto& def : tmpl.knobs) {
    auto it = config.knobs.find(def.name);
    if (it == config.knobs.end()) {
      continue;
    }
    const nlohmann::json& value = *it->second.value;
    if (def.json_flag) {
      auto flag =
          std::find_if(json_flags.begin(), json_flags.end(), [&](const auto& f) { return f.first == *def.json_flag; });
      if (flag == json_flags.end()) {
        json_flags.emplace_back(*def.json_flag, nlohmann::ordered_json::object());
        flag = json_flags.end() - 1;
      }
      set_path(flag->second, spelling_for(def, version).json_path, json_value(def, value));
      continue;
    }
    std::string text = def.type == KnobType::choice ? rendered_choice(def, value) : scalar_text(value);
    if (def.env) {
      knob_env.emplace_back(*def.env, text);
      continue;
    }
    const Spelling spelling = spelling_for(def, version);
    switch (def.type) {
    case KnobType::boolean: {
      const auto& words = value.get<bool>() ? spelling.flag : spelling.flag_false;
      out.argv.insert(out.argv.end(), words.begin(), words.end());
      break;
    }
    case KnobType::list: {
      std::vector<std::string> items;
      for (const auto& item : value) {
        items.push_back(scalar_text(item));
      }
      const std::string& flag = spelling.flag.front();
      if (def.list_style == ListStyle::repeat) {
        for (const auto& item : items) {
          out.argv.push_back(flag);
          out.argv.push_back(item);
        }
      } else if (def.list_style == ListStyle::comma) {
        out.argv.push_back(flag);
        out.argv.push_back(util::join(items, ","));
      } else {
        out.argv.push_back(flag);
        out.argv.insert(out.argv.end(), items.begin(), items.end());
      }
      break;
    }
    default:
      out.argv.push_back(spelling.flag.front());
      out.argv.push_back(text);
      break;
    }
  }
  for (const auto& [flag, json] : json_flags) {
    out.argv.push_back(flag);
    out.argv.push_back(json.dump());
  }
  out.argv.insert(out.argv.end(), config.extra_args.begin(), config.extra_args.end());

  out.env = config.env;
  for (auto& [name, value] : knob_env) {
    auto same = std::find_if(out.env.begin(), out.env.end(), [&](const auto& e) { return e.first == name; });
    if (same != out.env.end()) {
      out.warnings.push_back(fmt::format("env {} is set both in env and by a knob; the knob wins", name));
      same->second = value;
    } else {
      out.env.emplace_back(name, value);
    }
  }
  if (config.gpus) {
    std::vector<std::string> ids;
    for (int gpu : *config.gpus) {
      ids.push_back(std::to_string(gpu));
    }
    out.env.emplace_back("CUDA_VISIBLE_DEVICES", util::join(ids, ","));
  }
  std::sort(out.env.begin(), out.env.end());
  for (const auto& name : tmpl.overridden_env) {
    if (std::any_of(out.env.begin(), out.env.end(), [&](const auto& e) { return e.first == name; })) {
      out.warnings.push_back(
          fmt::format("{} sets {} itself from its flags: the value in env is lost", tmpl.name, name));
    }
  }
  return out;
}

} // namespace specctl::server
