#pragma once

#include <specctl/remote/host.hpp>
#include <specctl/util/atomic_file.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace specctl::remote {

// Every process specctl launches carries SPECCTL_TAG=<tag> in its environment, so
// workers that leave the process group (SGLang's schedulers re-parent to PID 1)
// can still be found, and only ones specctl started are ever touched by tag.
inline constexpr const char* k_tag_variable = "SPECCTL_TAG";

// A server started detached: its own session and process group, output to a log
// file, its exit code to a file once it ends. All files live in `run_dir` on the host.
struct DetachSpec {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
  std::string run_dir;
  std::string tag;
};

struct RunFiles {
  std::string dir;
  std::string log() const { return dir + "/server.log"; }
  std::string pid() const { return dir + "/server.pid"; }
  std::string exit() const { return dir + "/server.exit"; }
  // Touched at every poll of the server: the run that owns it is alive.
  std::string heartbeat() const { return dir + "/owner.beat"; }
};

// Starts the command and returns its pid, which is also its process group and session id.
// The command runs on when specctl or its SSH connection goes away.
std::expected<int, Error> start_detached(Host& host, const DetachSpec& spec);

std::expected<bool, Error> is_alive(Host& host, int pid);

// The exit code the detached command left, or nullopt while it runs (or if it was killed).
std::expected<std::optional<int>, Error> read_exit_code(Host& host, const RunFiles& files);

// Signals a whole process group (and its leader, should it have left the group).
std::expected<void, Error> signal_group(Host& host, int pgid, int signal);
std::expected<void, Error> signal_pids(Host& host, const std::vector<int>& pids, int signal);

// Up to `max_bytes` of the file from byte `offset` on; empty when nothing new is there.
std::expected<std::string, Error> read_file_from(Host& host, const std::string& path, std::uint64_t offset,
                                                 std::size_t max_bytes);

// Pids of live processes whose environment holds SPECCTL_TAG=<tag>.
std::expected<std::vector<int>, Error> find_tagged(Host& host, const std::string& tag);

struct ProcessInfo {
  int pid = 0;
  int ppid = 0;
  int pgid = 0;
  // ps's STAT: "Z..." is a zombie, which is dead for every purpose of ours.
  std::string state;
  std::string name;
  std::string args;

  bool alive() const { return !state.empty() && state.front() != 'Z'; }
};

// What ps says about these pids; vanished pids are left out.
std::expected<std::vector<ProcessInfo>, Error> process_info(Host& host, const std::vector<int>& pids);

// One round trip for a server being watched: new log bytes, its exit code if it
// ended, and whether its process still lives (a zombie does not).
struct ServerPoll {
  std::string log_bytes;
  std::optional<int> exit_code;
  bool alive = false;
};
std::expected<ServerPoll, Error> poll_server(Host& host, const RunFiles& files, int pid, std::uint64_t log_offset,
                                             std::size_t max_bytes);

// The SPECCTL_TAG of a process, empty when it has none (it is not specctl's).
std::expected<std::string, Error> tag_of(Host& host, int pid);

// Pids holding a listening TCP socket on `port` (IPv4 or IPv6), from /proc.
std::expected<std::vector<int>, Error> port_holders(Host& host, int port);

// Each listening TCP socket on `port` and the processes holding it; none listed
// when its holder is a process this user may not look into (another user's).
struct PortSocket {
  std::string inode;
  std::vector<int> pids;
};
std::expected<std::vector<PortSocket>, Error> port_sockets(Host& host, int port);

// Writes `content` to a file on the host, creating its folder; atomically (temp
// file, then rename), so a reader on another machine never sees half of it.
std::expected<void, Error> put_file(Host& host, const std::string& remote_path, std::string_view content);

// A file copied back from the host (copy_back): its size there, and the bytes left
// out of the copy (0 when whole).
struct CopiedFile {
  std::uint64_t size = 0;
  std::uint64_t cut = 0;
};
// Bytes kept from a file's start when copy_back cuts it.
inline constexpr std::uint64_t k_copy_head_bytes = 1024 * 1024;

// Copies a file from the host to this machine in chunks (memory stays bounded,
// whatever its size), into a temporary file renamed over `local_path` at the end.
// With `keep`, a file larger than it keeps its first k_copy_head_bytes and its last
// keep - k_copy_head_bytes, and a line between them says how many bytes were cut.
// A failed local write (a full disk) is also recorded in `failures`, when given.
std::expected<CopiedFile, Error> copy_back(Host& host, const std::string& remote_path, const std::string& local_path,
                                           std::optional<std::uint64_t> keep = std::nullopt,
                                           util::WriteFailures* failures = nullptr);

// What a result needs to say where it was measured.
struct HostFacts {
  std::string hostname;
  std::string kernel;
  // nvidia-smi's name and driver of each GPU, one entry per GPU; empty without nvidia-smi.
  std::vector<std::string> gpus;
  std::string driver;
  std::string cuda;
  // Free space where the server runs (the home directory), in MiB.
  std::optional<std::uint64_t> free_disk_mib;
};

std::expected<HostFacts, Error> host_facts(Host& host);

} // namespace specctl::remote
