#include <doctest/doctest.h>

#include <specctl/util/sha256.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace specctl::util;

namespace {

// FIPS 180-4's examples (NIST "SHA256.pdf", and the one-million-'a' vector of the
// NIST test suite).
constexpr const char* k_empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr const char* k_abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr const char* k_448_bits_message = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
constexpr const char* k_448_bits = "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
constexpr const char* k_million_a = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";

} // namespace

TEST_CASE("util::sha256 matches the FIPS 180-4 test vectors") {
  CHECK(sha256_hex("") == k_empty);
  CHECK(sha256_hex("abc") == k_abc);
  CHECK(sha256_hex(k_448_bits_message) == k_448_bits);
  CHECK(sha256_hex(std::string(1'000'000, 'a')) == k_million_a);
}

TEST_CASE("util::Sha256 gives the same digest whatever the pieces' sizes") {
  const std::string message(1'000'000, 'a');
  for (const std::size_t piece :
       {std::size_t{1}, std::size_t{55}, std::size_t{63}, std::size_t{64}, std::size_t{65}, std::size_t{4097}}) {
    CAPTURE(piece);
    Sha256 hash;
    for (std::size_t at = 0; at < message.size(); at += piece) {
      hash.update(std::string_view(message).substr(at, piece));
    }
    CHECK(hash.hex_digest() == k_million_a);
  }
  // Lengths around the padding's boundary (55, 56, 64 bytes) take one or two extra blocks.
  CHECK(sha256_hex(std::string(55, 'x')) != sha256_hex(std::string(56, 'x')));
  Sha256 split;
  split.update(std::string(56, 'x').substr(0, 30));
  split.update(std::string(26, 'x'));
  CHECK(split.hex_digest() == sha256_hex(std::string(56, 'x')));
}

TEST_CASE("util::sha256_file streams a file and names a missing one") {
  const auto dir = std::filesystem::temp_directory_path() / ("specctl-sha256-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / "data.bin";
  {
    std::ofstream out(path, std::ios::binary);
    // Past one read block (64 KiB), so the streaming path is taken.
    out << std::string(1'000'000, 'a');
  }
  SUBCASE("a file") {
    const auto digest = sha256_file(path);
    REQUIRE(digest.has_value());
    CHECK(*digest == k_million_a);
  }
  SUBCASE("a missing file") {
    const auto digest = sha256_file(dir / "missing.bin");
    REQUIRE_FALSE(digest.has_value());
    CHECK(digest.error().kind() == specctl::ErrorKind::bad_input);
    CHECK(std::string(digest.error().what()).find("missing.bin") != std::string::npos);
  }
  SUBCASE("a folder") {
    CHECK_FALSE(sha256_file(dir).has_value());
  }
  std::filesystem::remove_all(dir);
}
