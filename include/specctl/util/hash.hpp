#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace specctl::util {

// FNV-1a, 64 bits: a fast, stable hash of bytes, not a security hash.
std::uint64_t fnv1a_64(std::string_view data);

// FNV-1a, 64 bits, as 16 hex digits: a stable fingerprint of a file's content
// (provenance, detecting a changed experiment on --resume).
std::string fingerprint(std::string_view data);

// One step of SplitMix64: spreads every bit of `x` over the result, so that
// nearby inputs (ids, indices, seeds) give unrelated pseudo-random values.
std::uint64_t mix64(std::uint64_t x);

} // namespace specctl::util
