#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace specctl::util {

// FNV-1a, 64 bits, as 16 hex digits: a stable fingerprint of a file's content
// (provenance, detecting a changed experiment on --resume), not a security hash.
std::string fingerprint(std::string_view data);

} // namespace specctl::util
