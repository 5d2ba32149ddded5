#include <doctest/doctest.h>

#include <specctl/util/hash.hpp>

using namespace specctl::util;

TEST_CASE("util::fnv1a_64 is FNV-1a with the standard 64-bit offset basis") {
  // The published test vectors (http://www.isthe.com/chongo/tech/comp/fnv/).
  CHECK(fnv1a_64("") == 0xcbf29ce484222325ULL);
  CHECK(fnv1a_64("a") == 0xaf63dc4c8601ec8cULL);
  CHECK(fnv1a_64("foobar") == 0x85944171f73967e8ULL);
  CHECK(fingerprint("foobar") == "85944171f73967e8");
}

TEST_CASE("util::mix64 is one SplitMix64 step") {
  // SplitMix64 seeded with 0 yields 0xe220a8397b1dcdaf first.
  CHECK(mix64(0) == 0xe220a8397b1dcdafULL);
  CHECK(mix64(1) != mix64(2));
}
