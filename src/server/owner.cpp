#include <specctl/server/lifecycle.hpp>

#include "lifecycle_util.hpp"

#include <specctl/util/text.hpp>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace specctl::server {

namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return util::trim(line);
}

std::string hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) {
    return "";
  }
  return name;
}

} // namespace

namespace detail {

std::string start_ticks_of(int pid) {
  std::string stat = read_first_line(fmt::format("/proc/{}/stat", pid));
  // The name in parentheses may hold spaces: fields count from the last ')'.
  auto close = stat.rfind(')');
  if (close == std::string::npos) {
    return "";
  }
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  // After ")": state is field 3, starttime field 22.
  for (int k = 3; k <= 22 && fields >> field; ++k) {
    if (k == 22) {
      return field;
    }
  }
  return "";
}

std::optional<bool> alive_here(const RunOwner& owner) {
  // The machine does not change while specctl runs.
  static const RunOwner me = RunOwner::this_process();
  if (owner.coordinator.empty() || owner.coordinator != me.coordinator || owner.boot_id != me.boot_id) {
    return std::nullopt;
  }
  return owner.pid > 0 && start_ticks_of(owner.pid) == owner.start_ticks;
}

nlohmann::json meta_to_json(const ServerMeta& meta) {
  nlohmann::json owner = {{"coordinator", meta.owner->coordinator},
                          {"boot_id", meta.owner->boot_id},
                          {"pid", meta.owner->pid},
                          {"start_ticks", meta.owner->start_ticks},
                          {"since", meta.owner->since},
                          {"experiment", meta.owner->experiment},
                          {"results", meta.owner->results}};
  return {{"port", meta.port},
          {"gpus", meta.gpus ? nlohmann::json(*meta.gpus) : nlohmann::json(nullptr)},
          {"owner", owner}};
}

ServerMeta parse_meta(const std::string& text) {
  ServerMeta meta;
  auto json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_object()) {
    if (json.contains("port") && json["port"].is_number_integer()) {
      meta.port = json["port"].get<int>();
    }
    if (json.contains("gpus") && json["gpus"].is_array()) {
      std::vector<int> gpus;
      for (const auto& g : json["gpus"]) {
        if (g.is_number_integer()) {
          gpus.push_back(g.get<int>());
        }
      }
      meta.gpus = gpus;
    }
    if (json.contains("owner") && json["owner"].is_object()) {
      const auto& o = json["owner"];
      auto text_of = [&](const char* key) {
        return o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : "";
      };
      RunOwner owner;
      owner.coordinator = text_of("coordinator");
      owner.boot_id = text_of("boot_id");
      owner.pid = o.contains("pid") && o["pid"].is_number_integer() ? o["pid"].get<int>() : 0;
      owner.start_ticks = text_of("start_ticks");
      owner.since = text_of("since");
      owner.experiment = text_of("experiment");
      owner.results = text_of("results");
      meta.owner = owner;
    }
    return meta;
  }
  // Written by specctl before runs had owners: "port=N gpus=0,1|all".
  std::istringstream fields(text);
  std::string field;
  while (fields >> field) {
    if (field.starts_with("port=")) {
      meta.port = std::atoi(field.c_str() + 5);
    } else if (field.starts_with("gpus=") && field != "gpus=all") {
      std::vector<int> gpus;
      std::istringstream ids(field.substr(5));
      std::string id;
      while (std::getline(ids, id, ',')) {
        gpus.push_back(std::atoi(id.c_str()));
      }
      meta.gpus = gpus;
    }
  }
  return meta;
}

} // namespace detail

RunOwner RunOwner::this_process(std::string experiment, std::string results) {
  RunOwner owner;
  owner.coordinator = hostname();
  owner.boot_id = read_first_line("/proc/sys/kernel/random/boot_id");
  owner.pid = static_cast<int>(::getpid());
  owner.start_ticks = detail::start_ticks_of(owner.pid);
  owner.since = fmt::format("{:%Y-%m-%d %H:%M} UTC",
                            fmt::gmtime(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())));
  owner.experiment = std::move(experiment);
  owner.results = std::move(results);
  return owner;
}

bool RunOwner::same_process(const RunOwner& other) const {
  return coordinator == other.coordinator && boot_id == other.boot_id && pid == other.pid &&
         start_ticks == other.start_ticks;
}

std::string RunOwner::describe() const {
  std::string what = experiment.empty() ? "specctl" : "specctl run " + experiment;
  std::string where = results.empty() ? "" : ", " + results;
  return fmt::format("{} (pid {} on {}, since {}{})", what, pid, coordinator.empty() ? "?" : coordinator, since, where);
}

} // namespace specctl::server
