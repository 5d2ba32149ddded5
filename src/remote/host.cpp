#include <specctl/remote/host.hpp>

#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <filesystem>

#include <fmt/format.h>

namespace specctl::remote {

namespace {

// Raw bytes per command: 64 KiB of base64, well under Linux's 128 KiB limit on one argument.
constexpr std::size_t k_piece_bytes = 48 * 1024;

} // namespace

std::expected<void, Error> Host::write_file(const std::string& path, std::string_view bytes, util::Duration timeout) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const std::string encoded = path + ".b64.part";
  const std::string temp = path + ".part";
  const auto fail = [&](const std::string& why) {
    return std::unexpected(Error(fmt::format("{}: cannot write {}: {}", describe(), path, why)));
  };
  auto started = exec(
      fmt::format("mkdir -p {} && : > {}", util::shell_quote(dir.empty() ? "." : dir), util::shell_quote(encoded)));
  if (!started) {
    return std::unexpected(started.error());
  }
  if (started->exit_code != 0) {
    return fail(util::first_line(started->err));
  }
  for (std::size_t at = 0; at < bytes.size(); at += k_piece_bytes) {
    auto piece = exec(
        fmt::format("printf '%s' {} >> {}", util::base64(bytes.substr(at, k_piece_bytes)), util::shell_quote(encoded)),
        timeout);
    if (!piece) {
      return std::unexpected(piece.error());
    }
    if (piece->exit_code != 0 || piece->timed_out) {
      return fail(piece->timed_out ? "timed out" : util::first_line(piece->err));
    }
  }
  auto done = exec(fmt::format("base64 -d {0} > {1} && rm -f {0} && mv -f {1} {2}", util::shell_quote(encoded),
                               util::shell_quote(temp), util::shell_quote(path)),
                   timeout);
  if (!done) {
    return std::unexpected(done.error());
  }
  if (done->exit_code != 0 || done->timed_out) {
    return fail(done->timed_out ? "timed out" : util::first_line(done->err));
  }
  return {};
}

} // namespace specctl::remote
