#include "openssh_host_impl.hpp"

#include <specctl/util/shell.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

// Jump hosts on the OpenSSH transport.
//
// ssh's own -J would do, but it hands the ssh that reaches a hop only -F:
// the identity, known_hosts and host key policy the experiment gives a hop
// would be lost. So the hops become a chain of ProxyCommands, each the hop's
// own `ssh ... -W [%h]:%p hop` whose ProxyCommand is the hop before it.
//
// A ProxyCommand line is %-expanded once by the ssh that runs it, then run by
// /bin/sh. So every word of a line is shell-quoted and then token-escaped once,
// except the -W target, whose %h and %p are the next host's. A hop's line is
// one word of the next hop's line (its -o ProxyCommand=), and so is expanded
// exactly once by each ssh it passes: by the runner of the next line, which
// hands it on verbatim, and by the hop's ssh, which runs it.
//
// A master started with ControlPersist sends its ProxyCommand's stderr to
// /dev/null, and with it a hop's "Host key verification failed.". Each hop's
// ssh therefore writes its stderr to a file of its own in the control folder,
// which jump_failure() reads when a master cannot start.

namespace specctl::remote::openssh {

namespace {

struct HopFile {
  const OpenSshTarget* hop;
  std::string file;
};

// Every hop with its stderr file, nearest first: a first hop's own hops come
// before it ("jump-1-1.err"), then the hops in order ("jump-1.err", ...).
void nearest_first(const std::vector<OpenSshTarget>& hops, const std::string& dir, const std::string& prefix,
                   std::vector<HopFile>& out) {
  for (std::size_t i = 0; i < hops.size(); ++i) {
    const auto name = prefix + std::to_string(i + 1);
    if (i == 0 && !hops[0].jumps.empty()) {
      nearest_first(hops[0].jumps, dir, name + "-", out);
    }
    out.push_back({&hops[i], dir + "/" + name + ".err"});
  }
}

// The line that reaches the host after hops[count - 1].
std::string line_for(const std::vector<OpenSshTarget>& hops, std::size_t count, const std::string& prefix,
                     const OpenSshTarget& target, const std::string& program) {
  const OpenSshTarget& hop = hops[count - 1];
  std::vector<std::string> args = {program};
  if (target.config_file) {
    args.insert(args.end(), {"-F", *target.config_file});
  }
  add_login_options(hop, args);
  const auto name = prefix + std::to_string(count);
  if (count > 1) {
    args.insert(args.end(), {"-o", "ProxyCommand=" + line_for(hops, count - 1, prefix, target, program)});
  } else if (!hop.jumps.empty()) {
    args.insert(args.end(),
                {"-o", "ProxyCommand=" + line_for(hop.jumps, hop.jumps.size(), name + "-", target, program)});
  }
  args.insert(args.end(), {"-W", "[%h]:%p", "--", hop.destination});
  std::string line;
  for (const auto& arg : args) {
    line += (line.empty() ? "" : " ") + (arg == "[%h]:%p" ? arg : escape_tokens(util::shell_quote(arg)));
  }
  return line + " 2>" + escape_tokens(util::shell_quote(target.control_dir + "/" + name + ".err"));
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) {
      out.push_back(line);
    }
  }
  return out;
}

} // namespace

std::string proxy_command(const OpenSshTarget& target, const std::string& program) {
  return line_for(target.jumps, target.jumps.size(), "jump-", target, program);
}

void clear_jump_errors(const OpenSshTarget& target) {
  std::vector<HopFile> hops;
  nearest_first(target.jumps, target.control_dir, "jump-", hops);
  for (const auto& hop : hops) {
    std::error_code ec;
    std::filesystem::remove(hop.file, ec);
  }
}

std::optional<Error> jump_failure(const OpenSshTarget& target, const std::string& where) {
  std::vector<HopFile> hops;
  nearest_first(target.jumps, target.control_dir, "jump-", hops);
  for (const auto& [hop, file] : hops) {
    std::ifstream in(file);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto lines = lines_of(text);
    if (lines.empty()) {
      continue;
    }
    // The hop was reached, but would not forward: "channel 0: open failed:
    // administratively prohibited: ..." or "... connect failed: ...".
    for (const auto& line : lines) {
      if (auto at = line.find("open failed: "); at != std::string::npos) {
        return Error(fmt::format("{}: through {}: cannot forward to the next host: {}", where, hop->describe(),
                                 line.substr(at + 13)),
                     ErrorKind::unreachable);
      }
    }
    return classify_failure(fmt::format("{}: cannot reach jump host {}", where, hop->describe()), text, 255).error;
  }
  return std::nullopt;
}

} // namespace specctl::remote::openssh
