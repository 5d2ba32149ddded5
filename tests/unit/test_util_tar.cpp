// util::TarWriter against the real reader: GNU tar lists and unpacks what it
// writes, with the names, modes and bytes given.

#include <doctest/doctest.h>

#include "../support/files.hpp"
#include "../support/temp_dir.hpp"

#include <specctl/remote/local_host.hpp>
#include <specctl/util/shell.hpp>
#include <specctl/util/tar.hpp>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace fs = std::filesystem;
using specctl::util::TarWriter;

namespace {

std::string run(const std::string& line) {
  specctl::remote::LocalHost here;
  auto ran = here.exec(line);
  REQUIRE(ran);
  INFO(line << "\n" << ran->err);
  REQUIRE(ran->exit_code == 0);
  return ran->out;
}

} // namespace

TEST_CASE("util::TarWriter writes ustar that tar lists and unpacks byte for byte") {
  const specctl::test::TempDir dir("tar");
  // Sizes on, below and across a 512-byte block, and every byte value.
  std::string binary;
  for (int i = 0; i < 1300; ++i) {
    binary.push_back(static_cast<char>(i % 256));
  }
  const std::string block(512, 'x');
  TarWriter tar;
  tar.add_file("tool", binary, 0755);
  tar.add_directory("lib");
  tar.add_file("lib/libone.so.1", block, 0644);
  tar.add_file("lib/empty", "", 0600);
  const std::string archive = std::move(tar).finish();
  CHECK(archive.size() % 512 == 0);
  const std::string file = dir.write("a.tar", archive);

  const std::string q = specctl::util::shell_quote(file);
  CHECK(run("tar -tf " + q) == "tool\nlib/\nlib/libone.so.1\nlib/empty\n");
  const auto out = dir.path() / "out";
  fs::create_directories(out);
  run("tar -xf " + q + " -C " + specctl::util::shell_quote(out.string()));
  CHECK(specctl::test::read_file(out / "tool") == binary);
  CHECK(specctl::test::read_file(out / "lib/libone.so.1") == block);
  CHECK(fs::file_size(out / "lib/empty") == 0);
  CHECK((fs::status(out / "tool").permissions() & fs::perms::owner_exec) != fs::perms::none);
  CHECK((fs::status(out / "lib/libone.so.1").permissions() & fs::perms::owner_exec) == fs::perms::none);
  CHECK(fs::is_directory(out / "lib"));
}

TEST_CASE("util::TarWriter refuses names that would land outside the folder or not fit the header") {
  TarWriter tar;
  CHECK_THROWS_AS(tar.add_file("/etc/passwd", "x", 0644), std::invalid_argument);
  CHECK_THROWS_AS(tar.add_file("lib/../../x", "x", 0644), std::invalid_argument);
  CHECK_THROWS_AS(tar.add_file("", "x", 0644), std::invalid_argument);
  CHECK_THROWS_AS(tar.add_file(std::string(101, 'n'), "x", 0644), std::invalid_argument);
  CHECK_NOTHROW(tar.add_file(std::string(100, 'n'), "x", 0644));
}
