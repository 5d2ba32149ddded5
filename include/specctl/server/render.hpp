#pragma once

#include <specctl/server/server_config.hpp>

#include <string>
#include <utility>
#include <vector>

namespace specctl::server {

// The launch of one server: exactly what will run, as argv (never through a
// shell) and as a shell-quoted line for people and for hosts reached over SSH.
struct LaunchCommand {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
  // Things a user should know before running it (e.g. env the engine overwrites).
  std::vector<std::string> warnings;

  // `NAME=value ... word word`, every value quoted for a POSIX shell.
  std::string shell_line() const;
};

struct RenderOptions {
  // Directory of the specctl binary, for templates that launch a program shipped with it (specsim).
  std::string specctl_bindir;
};

// Renders a resolved configuration through its template. Knobs come out in the
// template's order; knobs that share a JSON-valued flag are combined into one.
LaunchCommand render_launch(const ServerConfig& config, const RenderOptions& options);

// The placeholders a template command may use.
const std::vector<std::string>& command_placeholders();

} // namespace specctl::server
