#pragma once

#include <specctl/server/server_config.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specctl::server {

// The launch of one server: exactly what will run, as argv (never through a
// shell) and as a shell-quoted line for people and for hosts reached over SSH.
struct LaunchCommand {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
  // The template's telemetry_command, its placeholders filled in.
  std::vector<std::string> telemetry;
  // The template's dcgmi_command, filled in; empty when it names none.
  std::vector<std::string> dcgmi;
  // Things a user should know before running it (e.g. env the engine overwrites).
  std::vector<std::string> warnings;

  // `NAME=value ... word word`, every value quoted for a POSIX shell.
  std::string shell_line() const;
};

struct RenderOptions {
  // Directory of the specctl binary, for templates that launch a program shipped with it (specsim).
  std::string specctl_bindir;
  // The installed engine's version (what the template's version_command printed, e.g.
  // "0.5.16" or "0.5.10.post1"): knobs with `since`/`before` spellings render the one this
  // version accepts. Unknown (nullopt, empty) renders the base spelling.
  std::optional<std::string> engine_version = std::nullopt;
};

// Renders a resolved configuration through its template. Knobs come out in the
// template's order; knobs that share a JSON-valued flag are combined into one.
LaunchCommand render_launch(const ServerConfig& config, const RenderOptions& options);

// The leading dotted numbers of a version: "v0.5.10.post1" -> {0, 5, 10}, "0.11.0rc2" ->
// {0, 11, 0}. nullopt when it does not start with a number.
std::optional<std::vector<long>> parse_version(std::string_view text);

// Compares dotted numbers, missing parts counting as 0: {0, 5} == {0, 5, 0} < {0, 5, 16}.
// Negative, 0 or positive.
int compare_versions(const std::vector<long>& a, const std::vector<long>& b);

// The placeholders a template command may use.
const std::vector<std::string>& command_placeholders();

} // namespace specctl::server
