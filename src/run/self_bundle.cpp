// This specctl as a bundle that runs on any Linux of its machine, whatever its
// distribution and glibc: the binary, every shared library the process has
// loaded, and the dynamic loader they were built with, run as
// `DIR/ld.so --library-path DIR/lib DIR/specctl ...`. Nothing of the host's
// libraries is used, so glibc 2.28 (RHEL 8), 2.31 (Ubuntu 20.04, Debian 11) or a
// Debian 12 without fmt or yaml-cpp run it alike; the kernel must be 3.2 or
// later (this glibc's floor).

#include "bench_client.hpp"

#include <specctl/util/tar.hpp>

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <elf.h>
#include <link.h>

namespace specctl::run::detail {

namespace {

struct Loaded {
  std::string interpreter;            // PT_INTERP of the program
  std::vector<std::string> libraries; // as the loader found them: DIR/SONAME
};

int collect(dl_phdr_info* info, size_t /*size*/, void* data) {
  auto& loaded = *static_cast<Loaded*>(data);
  const std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
  if (name.empty()) {
    // The program itself: its PT_INTERP names the loader.
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
      if (info->dlpi_phdr[i].p_type == PT_INTERP) {
        loaded.interpreter = reinterpret_cast<const char*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
      }
    }
  } else if (name.front() == '/') {
    // linux-vdso.so.1 is the kernel's and no file.
    loaded.libraries.push_back(name);
  }
  return 0;
}

std::expected<std::string, Error> read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  if (!in) {
    return std::unexpected(Error(fmt::format("cannot read {} for the host's copy of specctl", path)));
  }
  return bytes.str();
}

} // namespace

std::expected<std::string, Error> self_bundle() {
  Loaded loaded;
  ::dl_iterate_phdr(collect, &loaded);
  if (loaded.interpreter.empty()) {
    return std::unexpected(Error("this specctl names no dynamic loader (PT_INTERP), so it cannot be bundled"));
  }
  std::error_code ec;
  const std::string interpreter = std::filesystem::canonical(loaded.interpreter, ec).string();
  if (ec) {
    return std::unexpected(
        Error(fmt::format("cannot find this specctl's dynamic loader {}: {}", loaded.interpreter, ec.message())));
  }
  constexpr unsigned k_executable = 0755;
  constexpr unsigned k_library = 0644;
  // A member name that ustar cannot hold (over 100 bytes) is an error, never a throw out of here.
  try {
    util::TarWriter tar;
    for (const auto& [name, path, mode] :
         {std::tuple{std::string("specctl"), std::string("/proc/self/exe"), k_executable},
          std::tuple{std::string(k_bundle_loader), interpreter, k_executable}}) {
      auto bytes = read_whole(path);
      if (!bytes) {
        return std::unexpected(bytes.error());
      }
      tar.add_file(name, *bytes, mode);
    }
    tar.add_directory(k_bundle_libraries);
    std::set<std::string> names;
    for (const auto& path : loaded.libraries) {
      const std::string name = std::filesystem::path(path).filename().string();
      // The loader is there already; a name twice (two paths to one soname) is one library.
      if (std::filesystem::equivalent(path, interpreter, ec) || !names.insert(name).second) {
        continue;
      }
      auto bytes = read_whole(path);
      if (!bytes) {
        return std::unexpected(bytes.error());
      }
      tar.add_file(fmt::format("{}/{}", k_bundle_libraries, name), *bytes, k_library);
    }
    return std::move(tar).finish();
  } catch (const std::invalid_argument& e) {
    return std::unexpected(Error(fmt::format("cannot bundle this specctl: {}", e.what())));
  }
}

std::vector<std::string> bundle_command(const std::string& dir) {
  return {dir + "/" + k_bundle_loader, "--library-path", fmt::format("{}/{}", dir, k_bundle_libraries),
          dir + "/specctl"};
}

} // namespace specctl::run::detail
