// The template loader (templates/*.yaml, with `extends` reaching the shipped
// templates), and for a template that loads, the launch command rendered with
// a value for every knob, at no engine version and at a few.

#include "fuzz_support.hpp"

#include <specctl/server/render.hpp>
#include <specctl/server/server_config.hpp>
#include <specctl/server/server_template.hpp>
#include <specctl/util/diagnostics.hpp>
#include <specctl/util/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>

using namespace specctl;

namespace {

// A value of the knob's type, as resolve.cpp's type_knob would give one.
nlohmann::json value_for(const server::KnobDef& def, bool flip) {
  switch (def.type) {
  case server::KnobType::boolean:
    return flip;
  case server::KnobType::integer: {
    // Inside the knob's range where that is a sane number (the harness must not overflow a cast itself).
    double low = def.min && std::isfinite(*def.min) ? std::clamp(*def.min, -1e6, 1e6) : -1e6;
    double high = def.max && std::isfinite(*def.max) ? std::clamp(*def.max, low, 1e6) : 1e6;
    return static_cast<std::int64_t>(std::clamp(1.0, low, high));
  }
  case server::KnobType::number:
    return def.min && std::isfinite(*def.min) ? *def.min : 0.5;
  case server::KnobType::string:
    return flip ? "two words" : "it's";
  case server::KnobType::choice:
    return def.choices.empty() ? "" : (flip ? def.choices.back() : def.choices.front()).first;
  case server::KnobType::list:
    return nlohmann::json::array({"1", flip ? "a b" : "2"});
  }
  return nullptr;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  const auto& dir = fuzz::ScratchDir::path();
  ::setenv("HOME", dir.c_str(), 1);
  ::setenv("XDG_CONFIG_HOME", (dir / "config").c_str(), 1);
  ::unsetenv("SPECCTL_TEMPLATE_PATH");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > fuzz::k_max_input) {
    return -1;
  }
  // In a folder of the search path, so `extends: fuzz` finds the input itself.
  static const auto dir = fuzz::ScratchDir::path() / "templates";
  static const std::string path = (dir / "fuzz.yaml").string();
  static const auto search_path = server::template_search_path(fuzz::ScratchDir::path().string());
  fuzz::write_file(path, fuzz::as_text(data, size));
  try {
    util::Diagnostics diag;
    auto tmpl = server::load_template(path, search_path, diag, util::Location{"experiment.yaml", 1, 1});
    for (const auto& d : diag.sorted()) {
      (void)d.str();
    }
    if (!tmpl || diag.has_errors()) {
      return 0;
    }
    (void)tmpl->knob_names();
    for (bool flip : {false, true}) {
      server::ServerConfig config;
      config.tmpl = tmpl;
      config.host = "local";
      config.model = "/models/it's here";
      config.port = tmpl->default_port;
      config.extra_args = {"--extra", "a b"};
      config.env = {{"NCCL_DEBUG", "INFO"}};
      config.gpus = std::vector<int>{0, 1};
      for (const auto& knob : tmpl->knobs) {
        config.knobs[knob.name] = server::KnobSetting{value_for(knob, flip), knob.where, false};
      }
      for (const std::optional<std::string>& version :
           {std::optional<std::string>{}, std::optional<std::string>{"0.5.16"},
            std::optional<std::string>{"v0.4.10.post1"}, std::optional<std::string>{"nightly"}}) {
        auto launch = server::render_launch(config, server::RenderOptions{"/usr/local/bin", version});
        (void)launch.shell_line();
      }
    }
  } catch (const Error&) {
    // specctl's one error type is a clean refusal; anything else escapes and is a finding.
  }
  return 0;
}
