// What the jobs of the sweep's Slurm hosts share: one serialized connection
// per login node, and what an earlier run's journal says about its jobs.

#include "run_context.hpp"

#include <specctl/remote/local_host.hpp>

namespace specctl::run::detail {

namespace {

// A string field of a journal entry, empty when it is missing or not a string:
// a damaged line must not stop a resumed run (json::value() throws on a type).
std::string text_field(const json& entry, const char* key) {
  auto it = entry.find(key);
  return it != entry.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int int_field(const json& entry, const char* key, int fallback) {
  auto it = entry.find(key);
  return it != entry.end() && it->is_number_integer() ? it->get<int>() : fallback;
}

} // namespace

class SlurmLogins::Serial final : public remote::Host {
public:
  Serial(HostPool& pool, std::string name) : m_pool(pool), m_name(std::move(name)) {}

  std::string describe() const override { return m_name.empty() ? "local" : m_name; }

  std::expected<remote::CommandResult, Error> exec(const std::string& command_line, util::Duration timeout) override {
    std::lock_guard lock(m_mutex);
    if (m_name.empty()) {
      return m_local.exec(command_line, timeout);
    }
    auto host = m_pool.get(m_name);
    if (!host) {
      return std::unexpected(host.error());
    }
    auto ran = (*host)->exec(command_line, timeout);
    if (!ran && ran.error().unreachable()) {
      m_pool.drop(m_name);
    }
    return ran;
  }

  std::expected<int, Error> open_tunnel(const std::string&, int) override {
    return std::unexpected(Error("a Slurm login node opens no tunnels", ErrorKind::bad_input));
  }

private:
  HostPool& m_pool;
  std::string m_name;
  std::mutex m_mutex;
  remote::LocalHost m_local;
};

remote::Host& SlurmLogins::login(const std::string& login_name) {
  std::lock_guard lock(m_mutex);
  auto& slot = m_hosts[login_name];
  if (!slot) {
    slot = std::make_unique<Serial>(m_pool, login_name);
  }
  return *slot;
}

std::set<std::string> journaled_slurm_jobs(const std::vector<json>& entries) {
  std::set<std::string> ids;
  for (const auto& e : entries) {
    if (text_field(e, "event").starts_with("slurm_") && !text_field(e, "job_id").empty()) {
      ids.insert(text_field(e, "job_id"));
    }
  }
  return ids;
}

std::map<std::string, Adoption> unfinished_slurm_jobs(const std::vector<json>& entries) {
  std::map<std::string, Adoption> open;
  for (const auto& e : entries) {
    std::string event = text_field(e, "event");
    std::string variant = text_field(e, "variant");
    if (event == "slurm_submitted" || event == "slurm_adopted") {
      open[variant] = Adoption{text_field(e, "job_id"), text_field(e, "job_dir"), int_field(e, "attempt", 1)};
    } else if (event == "slurm_finished" && open.contains(variant) && open[variant].job_id == text_field(e, "job_id")) {
      open.erase(variant);
    }
  }
  std::erase_if(open, [](const auto& item) { return item.second.job_id.empty() || item.second.job_dir.empty(); });
  return open;
}

} // namespace specctl::run::detail
