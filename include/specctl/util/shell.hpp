#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace specctl::util {

// Quotes one word for a POSIX shell. Words made only of safe characters stay
// as they are, anything else is wrapped in single quotes ('\'' for a quote),
// so no value can expand, split, or end the command.
std::string shell_quote(std::string_view word);

// Quotes every word of argv and joins them with spaces.
std::string shell_join(const std::vector<std::string>& argv);

// 32 random hex digits: a marker in a command's output that the command cannot
// guess, so its own output can never end it early.
std::string marker_nonce();

// A command as messages show it: quoted, and cut after 120 characters.
std::string brief_command(std::string_view command_line);

} // namespace specctl::util
