#include "old_root.hpp"

#include "binaries.hpp"
#include "files.hpp"
#include "process.hpp"
#include "skip.hpp"
#include "sshd.hpp"

#include <cstdlib>
#include <sstream>

#include <unistd.h>

namespace specctl::test {

namespace {

namespace fs = std::filesystem;

std::string inside(const fs::path& root, const fs::path& path) {
  return "/" + path.lexically_relative(root).string();
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  std::error_code ec;
  while (std::getline(dirs, dir, ':')) {
    if (!dir.empty() && fs::exists(fs::path(dir) / program, ec)) {
      return true;
    }
  }
  return false;
}

} // namespace

fs::path old_root(const std::string& suite) {
  const char* roots = std::getenv("SPECCTL_TEST_ROOTS");
  return fs::path(roots != nullptr && *roots != '\0' ? roots : "/var/cache/specctl-roots") / suite;
}

std::optional<std::string> old_root_unavailable(const std::string& suite) {
  if (auto why = TestSshd::unavailable()) {
    return why;
  }
  std::error_code ec;
  if (pretend_missing("roots") || !fs::exists(old_root(suite) / "bin/sh", ec)) {
    return "no " + suite + " root at " + old_root(suite).string() + " (scripts/test-roots.sh makes it)";
  }
  if (::geteuid() != 0) {
    return "no chroot for a test sshd: it needs root";
  }
  if (!on_path("patchelf") || !on_path("unshare")) {
    return "no patchelf or unshare (scripts/setup.sh --tests installs them)";
  }
  if (specsim_binary().empty()) {
    return "no specsim in this build";
  }
  return std::nullopt;
}

std::expected<std::string, std::string> install_specsim(const fs::path& root, const fs::path& dir) {
  const fs::path lib = dir / "lib";
  fs::create_directories(lib);
  fs::create_directories(dir / "fake-gpu");
  auto listed = run_program({"ldd", specsim_binary()}, dir);
  if (listed.exit_code != 0) {
    return std::unexpected("ldd " + specsim_binary() + ": " + listed.output);
  }
  std::error_code ec;
  for (const auto& line : lines_of(listed.output)) {
    // "\tlibfmt.so.9 => /lib/x86_64-linux-gnu/libfmt.so.9 (0x...)"
    std::istringstream words(line);
    std::string name;
    std::string arrow;
    std::string from;
    words >> name >> arrow >> from;
    if (arrow != "=>" || !from.starts_with('/')) {
      continue; // the loader and the kernel's vDSO
    }
    fs::copy_file(from, lib / name, fs::copy_options::overwrite_existing, ec);
    if (ec) {
      return std::unexpected("cannot copy " + from + ": " + ec.message());
    }
  }
  const fs::path loader = fs::canonical("/lib64/ld-linux-x86-64.so.2", ec);
  fs::copy_file(loader, dir / "ld.so", fs::copy_options::overwrite_existing, ec);
  fs::copy_file(specsim_binary(), dir / "specsim", fs::copy_options::overwrite_existing, ec);
  if (ec) {
    return std::unexpected("cannot copy specsim or its loader: " + ec.message());
  }
  auto patched = run_program({"patchelf", "--set-interpreter", inside(root, dir / "ld.so"), "--force-rpath",
                              "--set-rpath", inside(root, lib), (dir / "specsim").string()},
                             dir);
  if (patched.exit_code != 0) {
    return std::unexpected("patchelf: " + patched.output);
  }
  fs::create_symlink("../specsim", dir / "fake-gpu" / "nvidia-smi", ec);
  if (ec) {
    return std::unexpected("cannot link nvidia-smi: " + ec.message());
  }
  return inside(root, dir / "specsim");
}

} // namespace specctl::test
