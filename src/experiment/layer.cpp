#include "layer.hpp"

#include <specctl/util/text.hpp>

#include <fmt/format.h>
#include <regex>

namespace specctl::experiment::detail {

namespace {

const std::vector<std::string> k_health_keys = {"timeout", "interval", "stall", "path"};
const std::vector<std::string> k_cleanup_keys = {"policy", "allow", "gpu_free_below", "grace", "timeout", "busy"};

bool valid_env_name(const std::string& name) {
  static const std::regex k_name("[A-Za-z_][A-Za-z0-9_]*");
  return std::regex_match(name, k_name);
}

} // namespace

const std::vector<std::string>& server_keys() {
  static const std::vector<std::string> keys = {"template", "host",           "model",   "port", "listen",
                                                "knobs",    "args",           "env",     "gpus", "health",
                                                "cleanup",  "warmup_timeout", "log_keep"};
  return keys;
}

void flatten_server_block(const util::YamlField& block, Layer& layer) {
  const auto& keys = server_keys();
  for (const auto& [key, key_at, value] : block.entries()) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      continue;
    }
    bool nested = key == "knobs" || key == "env" || key == "health" || key == "cleanup";
    if (!nested) {
      layer.insert_or_assign(key, LayerEntry{value, key_at});
      continue;
    }
    if (!value.present() || !value.expect_map()) {
      continue;
    }
    if (key == "health") {
      value.check_keys(k_health_keys);
    } else if (key == "cleanup") {
      value.check_keys(k_cleanup_keys);
    } else {
      value.check_duplicates();
    }
    for (const auto& [sub, sub_at, sub_value] : value.entries()) {
      if (key == "env" && !valid_env_name(sub)) {
        value.diagnostics().error(
            sub_at, fmt::format("{}: \"{}\" is not a valid environment variable name", value.path(), sub));
        continue;
      }
      layer.insert_or_assign(key + "." + sub, LayerEntry{sub_value, sub_at});
    }
  }
}

Layer merge_layers(const std::vector<const Layer*>& layers) {
  Layer merged;
  for (const Layer* layer : layers) {
    for (const auto& [key, entry] : *layer) {
      merged.insert_or_assign(key, entry);
    }
  }
  return merged;
}

} // namespace specctl::experiment::detail
