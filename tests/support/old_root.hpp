#pragma once

// Test support: other systems to reach over SSH, as GPU nodes are. Debootstrap
// roots made once by scripts/test-roots.sh: Debian 11 "bullseye" (glibc 2.31) and
// a minimal Debian 12 "bookworm" without the libraries specctl links; a test sshd
// puts its sessions in one (SshdOptions::chroot).
//
//   if (auto why = old_root_unavailable("bullseye")) { skip(*why); return; }
//   auto specsim = install_specsim(old_root("bullseye"), folder_inside_the_root);

#include <expected>
#include <filesystem>
#include <optional>
#include <string>

namespace specctl::test {

// Where scripts/test-roots.sh makes the roots: $SPECCTL_TEST_ROOTS, else /var/cache/specctl-roots.
std::filesystem::path old_root(const std::string& suite);

// Why `suite`'s root cannot serve a test here (not made, not root, no patchelf,
// no sshd), or nothing.
std::optional<std::string> old_root_unavailable(const std::string& suite);

// Copies this build's specsim, the libraries it links and their loader into `dir`,
// a folder inside `root`, and rewrites its interpreter and library path (patchelf)
// to their paths as the root sees them, so that it runs there as on this machine
// (and its workers, which run /proc/self/exe, too). dir/fake-gpu/nvidia-smi is a link
// to it. Returns its path inside the root, or why it could not.
std::expected<std::string, std::string> install_specsim(const std::filesystem::path& root,
                                                        const std::filesystem::path& dir);

} // namespace specctl::test
