#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specctl::util {

// Levenshtein distance, for did-you-mean suggestions.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` when it is close enough to be a likely typo.
std::optional<std::string> suggest(std::string_view word, const std::vector<std::string>& candidates);

// ` (did you mean "x"?)` or empty: ready to append to a message.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

// Without leading and trailing whitespace (spaces, tabs, CR, LF).
std::string trim(std::string_view text);
// The same, as a view into `text`.
std::string_view trim_view(std::string_view text);

// The first line of the trimmed text: what a one-line error message quotes of a command's output.
std::string first_line(std::string_view text);

// `text` when it is at most `limit` bytes long, else its first `limit` bytes and "...":
// how a message quotes a piece of someone else's output.
std::string clip(std::string_view text, std::size_t limit);

// Joins with a separator.
std::string join(const std::vector<std::string>& parts, std::string_view separator);

// Shell-style glob with * and ? (no character classes), for process-name allowlists and --only.
bool glob_match(std::string_view pattern, std::string_view text);

// Standard base64 (RFC 4648) with padding.
std::string base64(std::string_view bytes);

// Makes a value safe and readable in a generated name: "a/b c" -> "a-b-c", "0.85" -> "0.85".
std::string slug(std::string_view text);

// Whether `name` may name a folder or file of a result folder: a word of letters,
// digits, '.', '_' and '-' (a slug), not made only of dots ("." and ".." are
// folders already), at most k_max_name_length long.
inline constexpr std::size_t k_max_name_length = 128;
bool path_safe_name(std::string_view name);

// Where the text stops being UTF-8 (RFC 3629: no overlong forms, no surrogates,
// nothing past U+10FFFF), or nullopt when it all is.
std::optional<std::size_t> invalid_utf8_at(std::string_view text);

// What of one line a regular expression is matched against: its first
// k_regex_window bytes. libstdc++'s std::regex matches recursively, a stack frame
// or more per character a `.*` or `\s+` runs over, so an unbounded line (a 30,000
// character one did) overflows the stack; no log marker or benchmark figure is
// 4 KiB into its line.
inline constexpr std::size_t k_regex_window = 4096;
inline std::string_view regex_window(std::string_view line) {
  return line.substr(0, k_regex_window);
}

} // namespace specctl::util
