#include <specctl/util/spawn.hpp>

#include <unistd.h>

extern char** environ;

namespace specctl::util {

namespace {

// posix_spawn takes argv and envp as arrays of char*, ending in a null pointer.
std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& text : strings) {
    out.push_back(text.data());
  }
  out.push_back(nullptr);
  return out;
}

} // namespace

SpawnSetup::SpawnSetup() {
  note(posix_spawn_file_actions_init(&m_actions));
  note(posix_spawnattr_init(&m_attr));
}

SpawnSetup::~SpawnSetup() {
  posix_spawn_file_actions_destroy(&m_actions);
  posix_spawnattr_destroy(&m_attr);
}

void SpawnSetup::note(int rc) {
  if (m_error == 0) {
    m_error = rc;
  }
}

void SpawnSetup::add_flags(short flags) {
  m_flags = static_cast<short>(m_flags | flags);
  note(posix_spawnattr_setflags(&m_attr, m_flags));
}

void SpawnSetup::add_open(int fd, const std::filesystem::path& path, int flags, mode_t mode) {
  note(posix_spawn_file_actions_addopen(&m_actions, fd, path.c_str(), flags, mode));
}

void SpawnSetup::add_dup2(int from, int to) {
  note(posix_spawn_file_actions_adddup2(&m_actions, from, to));
}

void SpawnSetup::add_close(int fd) {
  note(posix_spawn_file_actions_addclose(&m_actions, fd));
}

void SpawnSetup::add_close_from(int lowest) {
  note(posix_spawn_file_actions_addclosefrom_np(&m_actions, lowest));
}

void SpawnSetup::set_group(ProcessGroup group) {
  switch (group) {
  case ProcessGroup::inherit:
    break;
  case ProcessGroup::own_group:
    note(posix_spawnattr_setpgroup(&m_attr, 0));
    add_flags(POSIX_SPAWN_SETPGROUP);
    break;
  case ProcessGroup::own_session:
    add_flags(POSIX_SPAWN_SETSID);
    break;
  }
}

void SpawnSetup::unblock_signals() {
  sigset_t none;
  sigemptyset(&none);
  note(posix_spawnattr_setsigmask(&m_attr, &none));
  add_flags(POSIX_SPAWN_SETSIGMASK);
}

void SpawnSetup::default_signals(const sigset_t& signals) {
  note(posix_spawnattr_setsigdefault(&m_attr, &signals));
  add_flags(POSIX_SPAWN_SETSIGDEF);
}

void SpawnSetup::detach() {
  add_close_from(STDERR_FILENO + 1);
  set_group(ProcessGroup::own_session);
  unblock_signals();
  sigset_t defaults;
  sigfillset(&defaults);
  default_signals(defaults);
}

std::expected<pid_t, int> SpawnSetup::spawn(const std::filesystem::path& program, const std::vector<std::string>& argv,
                                            const std::vector<std::string>& env) const {
  auto env_storage = env;
  return spawn_with(program, argv, pointers(env_storage).data());
}

std::expected<pid_t, int> SpawnSetup::spawn(const std::filesystem::path& program,
                                            const std::vector<std::string>& argv) const {
  return spawn_with(program, argv, environ);
}

std::expected<pid_t, int> SpawnSetup::spawn_with(const std::filesystem::path& program,
                                                 const std::vector<std::string>& argv, char* const* envp) const {
  if (m_error != 0) {
    return std::unexpected(m_error);
  }
  auto argv_storage = argv;
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, program.c_str(), &m_actions, &m_attr, pointers(argv_storage).data(), envp);
  if (rc != 0) {
    return std::unexpected(rc);
  }
  return pid;
}

} // namespace specctl::util
