#pragma once

#include <specctl/remote/host.hpp>

namespace specctl::remote {

// This machine. Commands run under /bin/sh, spawned by util::SpawnSetup; a command that
// outlives its timeout is killed with its whole process group.
class LocalHost final : public Host {
public:
  std::string describe() const override { return "local"; }
  std::expected<CommandResult, Error> exec(const std::string& command_line,
                                           util::Duration timeout = k_default_command_timeout) override;
  std::expected<int, Error> open_tunnel(const std::string& target_host, int target_port) override;
  std::expected<void, Error> write_file(const std::string& path, std::string_view bytes,
                                        util::Duration timeout = k_default_upload_timeout) override;
};

} // namespace specctl::remote
