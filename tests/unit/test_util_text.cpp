#include <doctest/doctest.h>

#include <specctl/util/hash.hpp>
#include <specctl/util/size.hpp>
#include <specctl/util/text.hpp>

using namespace specctl::util;

TEST_CASE("did-you-mean suggestions") {
  std::vector<std::string> keys = {"variants", "benchmarks", "server", "hosts", "report", "name"};
  CHECK(did_you_mean("variantz", keys) == " (did you mean \"variants\"?)");
  CHECK(did_you_mean("benchmark", keys) == " (did you mean \"benchmarks\"?)");
  CHECK(did_you_mean("sever", keys) == " (did you mean \"server\"?)");
  CHECK(did_you_mean("completely_different", keys).empty());
  CHECK(did_you_mean("x", keys).empty());
  CHECK(specctl::util::edit_distance("kitten", "sitting") == 3);
  CHECK(specctl::util::edit_distance("", "abc") == 3);
}

TEST_CASE("glob_match") {
  CHECK(glob_match("sglang::*", "sglang::scheduler_TP0"));
  CHECK(glob_match("VLLM::*", "VLLM::Worker_TP3"));
  CHECK(glob_match("python*", "python3"));
  CHECK(glob_match("python?", "python3"));
  CHECK_FALSE(glob_match("python?", "python3.11"));
  CHECK_FALSE(glob_match("sglang::*", "Xorg"));
  CHECK(glob_match("*", ""));
  CHECK_FALSE(glob_match("a*b", "acbd"));
  CHECK(glob_match("a*b*c", "axxbyyc"));
}

TEST_CASE("slug") {
  CHECK(slug("eagle3") == "eagle3");
  CHECK(slug("a/b c") == "a-b-c");
  CHECK(slug("0.85") == "0.85");
  CHECK(slug("--x--") == "x");
}

TEST_CASE("parse_size_mib") {
  CHECK(parse_size_mib("1024MiB").value() == 1024);
  CHECK(parse_size_mib("1GiB").value() == 1024);
  CHECK(parse_size_mib("2TiB").value() == 2 * 1024 * 1024);
  CHECK(parse_size_mib("2048KiB").value() == 2);
  for (auto bad : {"1GB", "1024", "MiB", "-1MiB", "1.5GiB", "1000KiB", ""}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_size_mib(bad).has_value());
  }
}

TEST_CASE("fingerprint is stable and sensitive") {
  CHECK(fingerprint("") == "cbf29ce484222325");
  CHECK(fingerprint("a") == "af63dc4c8601ec8c");
  CHECK(fingerprint("name: a\n") != fingerprint("name: b\n"));
}

TEST_CASE("invalid_utf8_at: where text stops being strict UTF-8") {
  using specctl::util::invalid_utf8_at;
  CHECK_FALSE(invalid_utf8_at(""));
  CHECK_FALSE(invalid_utf8_at("plain ascii"));
  CHECK_FALSE(invalid_utf8_at("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF"));
  CHECK(invalid_utf8_at("\xC0\x80") == 0u);         // overlong NUL
  CHECK(invalid_utf8_at("ab\xE0\x80\xAF") == 2u);   // overlong '/'
  CHECK(invalid_utf8_at("x\xED\xA0\x80") == 1u);    // a surrogate
  CHECK(invalid_utf8_at("\xF4\x90\x80\x80") == 0u); // past U+10FFFF
  CHECK(invalid_utf8_at("ab\xE2\x82") == 2u);       // cut short
  CHECK(invalid_utf8_at("ok\x80") == 2u);           // a lone continuation byte
}
