#pragma once

// A command benchmark's line with its placeholders filled in, quoted for the shell.

#include <string>

namespace specctl::run {

// The values a `command` benchmark's placeholders stand for. `url` and `port`
// are the server as seen from where the command runs: the tunnel's local port
// for `on: local`, the server's own port for `on: host`.
struct CommandContext {
  std::string url;
  int port = 0;
  std::string variant;
  std::string model;
  std::string host;
};

// Fills {url}, {port}, {variant}, {model} and {host} in `run`; "{{" is a
// literal "{" (a lone "}" is always literal). Every value goes in through
// util::shell_quote, so none can expand, split or end the command. A
// placeholder written inside the user's own quotes ('{model}' or "{model}")
// closes those quotes around the value and reopens them, since quoting inside
// double quotes would leave $(...) live. Placeholders after a backslash or in
// a comment, and unknown ones (the experiment loader rejects those), stay as
// written. Here-documents are not understood: keep placeholders out of them.
std::string fill_command(const std::string& run, const CommandContext& context);

} // namespace specctl::run
