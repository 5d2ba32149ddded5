// The bundle a host runs specctl from (src/run/self_bundle.cpp), made of this
// test program: unpacked by tar, its loader runs it with none of the libraries
// of this machine's library folders, and it holds what the program loaded.

#include <doctest/doctest.h>

#include "../../src/run/bench_client.hpp"
#include "../support/files.hpp"
#include "../support/temp_dir.hpp"

#include <specctl/remote/local_host.hpp>
#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <filesystem>
#include <string>

namespace fs = std::filesystem;
namespace detail = specctl::run::detail;
using specctl::util::shell_quote;

namespace {

specctl::remote::CommandResult run_shell(const std::string& line) {
  specctl::remote::LocalHost here;
  auto ran = here.exec(line);
  REQUIRE(ran);
  return *ran;
}

} // namespace

TEST_CASE("this program's bundle runs from its own loader and libraries, with an empty environment") {
  auto bundle = detail::self_bundle();
  REQUIRE_MESSAGE(bundle, (bundle ? "" : bundle.error().what()));
  const specctl::test::TempDir dir("bundle");
  const std::string archive = dir.write("bundle.tar", *bundle);
  const fs::path unpacked = dir.path() / "b";
  fs::create_directories(unpacked);
  auto untar = run_shell("tar -xf " + shell_quote(archive) + " -C " + shell_quote(unpacked.string()));
  REQUIRE_MESSAGE(untar.exit_code == 0, untar.err);

  // The C library, the C++ library and the loader are the bundle's own.
  CHECK(fs::exists(unpacked / "lib/libc.so.6"));
  CHECK(fs::exists(unpacked / "lib/libstdc++.so.6"));
  CHECK(fs::exists(unpacked / detail::k_bundle_loader));
  CHECK_FALSE(fs::exists(unpacked / "lib" / detail::k_bundle_loader));

  const auto command = detail::bundle_command(unpacked.string());
  // The loader resolves every library from the bundle, none from /lib or /usr/lib.
  auto list = command;
  list.insert(list.begin() + 1, "--list");
  auto listed = run_shell("env -i " + specctl::util::shell_join(list));
  INFO(listed.out << listed.err);
  REQUIRE(listed.exit_code == 0);
  int libraries = 0;
  for (const auto& line : specctl::test::lines_of(listed.out)) {
    const auto arrow = line.find("=> ");
    if (arrow == std::string::npos) {
      continue;
    }
    ++libraries;
    CHECK_MESSAGE(line.find("=> " + unpacked.string() + "/") != std::string::npos, line);
  }
  CHECK(libraries >= 3);

  // And it runs: this test program lists its own cases.
  auto ran = run_shell("env -i " + specctl::util::shell_join(command) + " --list-test-cases");
  INFO(ran.err);
  CHECK(ran.exit_code == 0);
  CHECK(ran.out.find("this program's bundle runs from its own loader") != std::string::npos);
}
