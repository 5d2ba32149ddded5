// The JSON scanner of streamed chunks (bench::scan_chunk), checked against
// nlohmann::json as the reference grammar: what one accepts as an object the
// other must accept too, except where the scanner says it differs (UTF-8 is
// not checked; nesting deeper than its limit is refused).

#include "fuzz_support.hpp"

#include <specctl/bench/chunk.hpp>
#include <specctl/util/text.hpp>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

using namespace specctl;

namespace {

// Strict UTF-8 as nlohmann checks it: no overlong forms, no surrogates, nothing past U+10FFFF.
bool valid_utf8(std::string_view text) {
  return !util::invalid_utf8_at(text);
}

// The deepest nesting of objects and arrays, outside strings.
int max_depth(std::string_view text) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

// A \u escape of a UTF-16 surrogate: the grammar allows a lone one, nlohmann refuses it.
bool has_surrogate_escape(std::string_view text) {
  for (auto at = text.find("\\u"); at != std::string_view::npos; at = text.find("\\u", at + 1)) {
    if (at + 3 < text.size() && (text[at + 2] == 'd' || text[at + 2] == 'D')) {
      return true;
    }
  }
  return false;
}

// A number too large for a double ("1e400"): grammatical, but nlohmann refuses it.
bool overflows_double(std::string_view text) {
  try {
    auto parsed = nlohmann::json::parse(text.begin(), text.end());
    (void)parsed;
  } catch (const nlohmann::json::out_of_range&) {
    return true;
  } catch (const nlohmann::json::exception&) {
  }
  return false;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > fuzz::k_max_input) {
    return -1;
  }
  std::string_view text = fuzz::as_text(data, size);
  bench::ChunkFields fields;
  const bool scanned = bench::scan_chunk(text, fields);
  if (text.find('\0') != std::string_view::npos) {
    // JSON has no place for a NUL byte (nlohmann stops reading at one, so it is no reference here).
    if (scanned) {
      std::abort();
    }
    return 0;
  }
  const auto first = text.find_first_not_of(" \t\r\n");
  const bool is_object = first != std::string_view::npos && text[first] == '{';
  const bool reference = is_object && nlohmann::json::accept(text.begin(), text.end());
  if (scanned && !reference && valid_utf8(text) && !has_surrogate_escape(text) && !overflows_double(text)) {
    // The scanner took something that is not a JSON object.
    std::abort();
  }
  if (!scanned && reference && max_depth(text) < 60) {
    // The scanner refused a well-formed object.
    std::abort();
  }
  // What it recorded lies inside the input.
  for (std::string_view field : {fields.id, fields.finish_reason, fields.error_message}) {
    if (!field.empty() && (field.data() < text.data() || field.data() + field.size() > text.data() + text.size())) {
      std::abort();
    }
  }
  return 0;
}
