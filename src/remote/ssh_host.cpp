#include <specctl/remote/ssh_host.hpp>

#include "shell_pool.hpp"
#include "ssh_loop.hpp"

#include <specctl/util/duration.hpp>
#include <specctl/util/shell.hpp>
#include <specctl/util/text.hpp>

#include <filesystem>
#include <fmt/format.h>

#include <pwd.h>
#include <system_error>
#include <unistd.h>

namespace specctl::remote {

namespace {

std::string current_user() {
  if (const passwd* entry = ::getpwuid(::getuid()); entry != nullptr && entry->pw_name != nullptr) {
    return entry->pw_name;
  }
  return "root";
}

} // namespace

std::string SshTarget::describe() const {
  auto address = user.empty() ? fmt::format("{}:{}", hostname, port) : fmt::format("{}@{}:{}", user, hostname, port);
  if (!jumps.empty()) {
    std::vector<std::string> hops;
    for (const auto& hop : jumps) {
      hops.push_back(hop.name.empty() ? hop.hostname : hop.name);
    }
    address += " via " + util::join(hops, ", ");
  } else if (proxy_command) {
    address += " via ProxyCommand";
  }
  if (name.empty()) {
    return address;
  }
  return fmt::format("{} ({})", name, address);
}

SshHost::SshHost(std::unique_ptr<detail::SshLoop> loop) : m_loop(std::move(loop)) {
  m_shells = std::make_unique<ShellPool>(
      m_loop->describe(),
      [loop = m_loop.get()](const std::string& command_line,
                            util::Duration timeout) -> std::expected<ShellStream, Error> {
        auto fd = loop->open_exec_stream(command_line, timeout);
        if (!fd) {
          return std::unexpected(std::move(fd.error()));
        }
        return ShellStream{std::move(*fd), nullptr};
      },
      m_loop->target().connect_timeout, m_loop->target().shells);
}

SshHost::~SshHost() = default;

std::string SshHost::describe() const {
  return m_loop->describe();
}

std::expected<CommandResult, Error> SshHost::exec(const std::string& command_line, util::Duration timeout) {
  if (auto ran = m_shells->run(command_line, timeout)) {
    return std::move(*ran);
  }
  return m_loop->exec(command_line, timeout);
}

std::expected<int, Error> SshHost::open_tunnel(const std::string& target_host, int target_port) {
  return m_loop->open_tunnel(target_host, target_port);
}

std::expected<void, Error> SshHost::write_file(const std::string& path, std::string_view bytes,
                                               util::Duration timeout) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const std::string temp = path + ".part";
  auto ran =
      m_loop->exec(fmt::format("mkdir -p {0} && cat > {1} && mv -f {1} {2}", util::shell_quote(dir.empty() ? "." : dir),
                               util::shell_quote(temp), util::shell_quote(path)),
                   timeout, std::string(bytes));
  if (!ran) {
    return std::unexpected(ran.error());
  }
  if (ran->timed_out) {
    return std::unexpected(
        Error(fmt::format("{}: writing {} timed out after {}", describe(), path, util::format_duration(timeout)),
              ErrorKind::timed_out));
  }
  if (ran->exit_code != 0) {
    return std::unexpected(
        Error(fmt::format("{}: cannot write {}: {}", describe(), path, ran->err.substr(0, ran->err.find('\n')))));
  }
  return {};
}

std::expected<util::UniqueFd, Error> SshHost::open_stream(const std::string& target_host, int target_port,
                                                          util::Duration timeout) {
  return m_loop->open_stream(target_host, target_port, timeout);
}

int SshHost::reconnect_count() const {
  return m_loop->reconnect_count();
}

std::expected<std::unique_ptr<SshHost>, Error> connect_ssh(const SshTarget& target) {
  SshTarget resolved = target;
  if (resolved.user.empty()) {
    // As ssh does without a User.
    resolved.user = current_user();
  }
  if (resolved.hostname.empty() || resolved.port <= 0 || resolved.port > 65535) {
    return std::unexpected(Error(fmt::format("{}: invalid SSH address", resolved.describe()), ErrorKind::bad_input));
  }
  if (resolved.connect_timeout <= util::Duration::zero()) {
    return std::unexpected(
        Error(fmt::format("{}: the connect timeout must be positive", resolved.describe()), ErrorKind::bad_input));
  }
  auto route = ssh::make_route(resolved);
  if (!route) {
    return std::unexpected(std::move(route.error()));
  }
  auto connection = ssh::establish(resolved, **route, ssh::StopSignal{});
  if (!connection) {
    auto& failure = connection.error();
    // Refused keys and host keys will not get better; a host that did not answer may.
    if (failure.retry == ssh::Retry::yes && failure.error.kind() == ErrorKind::failed) {
      return std::unexpected(Error(failure.error.what(), ErrorKind::unreachable));
    }
    return std::unexpected(std::move(failure.error));
  }
  try {
    auto loop = std::make_unique<detail::SshLoop>(resolved, std::move(*route), std::move(*connection));
    return std::make_unique<SshHost>(std::move(loop));
  } catch (const Error& error) {
    return std::unexpected(error);
  } catch (const std::system_error& error) {
    return std::unexpected(
        Error(fmt::format("{}: cannot start the SSH thread: {}", resolved.describe(), error.what())));
  }
}

} // namespace specctl::remote
