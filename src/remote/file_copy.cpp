// Files come back from a host a chunk at a time: a server that logged gigabytes
// must not take specctl's memory with it, nor, with a cap, the result disk.

#include <specctl/remote/host_ops.hpp>

#include <specctl/util/atomic_file.hpp>
#include <specctl/util/parse.hpp>
#include <specctl/util/shell.hpp>
#include <specctl/util/size.hpp>
#include <specctl/util/text.hpp>
#include <specctl/util/unique_fd.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace specctl::remote {

namespace {

constexpr std::size_t k_chunk = 8 * 1024 * 1024;
constexpr util::Duration k_chunk_timeout = std::chrono::minutes{2};

Error local_error(const std::string& what, const std::string& path, int error) {
  return Error(fmt::format("{}: cannot {}: {}", path, what, std::strerror(error)));
}

std::expected<void, Error> write_all(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return std::unexpected(local_error("write", path, errno));
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

// Bytes [from, to) of the file on the host, appended to `fd`.
std::expected<void, Error> copy_range(Host& host, const std::string& remote_path, std::uint64_t from, std::uint64_t to,
                                      int fd, const std::string& local_path) {
  for (std::uint64_t at = from; at < to;) {
    auto want = static_cast<std::size_t>(std::min<std::uint64_t>(k_chunk, to - at));
    auto result = host.exec(fmt::format("tail -c +{} {} | head -c {}", at + 1, util::shell_quote(remote_path), want),
                            k_chunk_timeout);
    if (!result) {
      return std::unexpected(result.error());
    }
    if (result->timed_out || (result->out.empty() && result->exit_code != 0)) {
      return std::unexpected(Error(fmt::format("{}: cannot copy {}: {}", host.describe(), remote_path,
                                               result->timed_out ? "timed out" : util::first_line(result->err))));
    }
    if (result->out.empty()) {
      break; // The file shrank meanwhile: what is there is copied.
    }
    if (auto written = write_all(fd, result->out, local_path); !written) {
      return written;
    }
    at += result->out.size();
  }
  return {};
}

} // namespace

std::expected<CopiedFile, Error> copy_back(Host& host, const std::string& remote_path, const std::string& local_path,
                                           std::optional<std::uint64_t> keep, util::WriteFailures* failures) {
  auto stat = host.exec(fmt::format("wc -c < {}", util::shell_quote(remote_path)));
  if (!stat) {
    return std::unexpected(stat.error());
  }
  CopiedFile copied;
  auto size = util::parse_number<std::uint64_t>(stat->out);
  if (stat->exit_code != 0 || !size) {
    return std::unexpected(Error(fmt::format("{}: cannot copy {}: {}", host.describe(), remote_path,
                                             util::first_line(stat->err.empty() ? stat->out : stat->err))));
  }
  copied.size = *size;
  std::string temp = local_path + ".part";
  util::UniqueFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  auto fail = [&](Error error) {
    ::unlink(temp.c_str());
    // Only a local write tells of the result disk (a full one stops the run cleanly).
    if (failures != nullptr && std::string_view(error.what()).starts_with(temp)) {
      failures->record(error, copied.size);
    }
    return std::unexpected(std::move(error));
  };
  if (!fd) {
    return fail(local_error("create", temp, errno));
  }
  if (keep && copied.size > *keep) {
    std::uint64_t head = std::min(k_copy_head_bytes, *keep);
    std::uint64_t tail_from = copied.size - (*keep - head);
    copied.cut = tail_from - head;
    if (auto done = copy_range(host, remote_path, 0, head, fd.get(), temp); !done) {
      return fail(done.error());
    }
    std::string note =
        fmt::format("\n[specctl: {} bytes of {} cut here ({} of {} kept: the first {} and the last {})]\n", copied.cut,
                    remote_path, util::format_bytes(*keep), util::format_bytes(copied.size), util::format_bytes(head),
                    util::format_bytes(*keep - head));
    if (auto done = write_all(fd.get(), note, temp); !done) {
      return fail(done.error());
    }
    if (auto done = copy_range(host, remote_path, tail_from, copied.size, fd.get(), temp); !done) {
      return fail(done.error());
    }
  } else if (auto done = copy_range(host, remote_path, 0, copied.size, fd.get(), temp); !done) {
    return fail(done.error());
  }
  if (::fsync(fd.get()) != 0) {
    return fail(local_error("write", temp, errno));
  }
  fd.reset();
  if (::rename(temp.c_str(), local_path.c_str()) != 0) {
    return fail(local_error("rename into place", temp, errno));
  }
  return copied;
}

} // namespace specctl::remote
