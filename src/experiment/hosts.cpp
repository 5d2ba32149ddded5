#include "layer.hpp"
#include "ssh_hosts.hpp"

#include <specctl/util/text.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fmt/format.h>

namespace specctl::experiment::detail {

namespace {

// Slurm's time limits are whole minutes.
constexpr util::Duration k_min_time_limit = std::chrono::minutes{1};
// The most often a run may ask Slurm's controller, which serves everyone.
constexpr util::Duration k_min_slurm_poll = std::chrono::milliseconds{100};

const std::vector<std::string> k_host_keys = {"local",     "ssh",       "identity", "host_key", "known_hosts", "jump",
                                              "transport", "state_dir", "pool",     "slurm",    "slots"};
// Keys of a machine's connection, which pools, Slurm clusters and local hosts do not take.
const std::vector<std::string> k_connection_keys = {"ssh", "identity", "host_key", "known_hosts", "jump", "transport"};
const std::vector<std::string> k_slurm_keys = {"partition",   "account",  "gpus",  "time_limit",
                                               "sbatch_args", "setup",    "login", "work_dir",
                                               "specctl",     "max_jobs", "poll",  "retry_on"};
const std::vector<std::string> k_retry_names = {"preempted", "node_fail", "boot_fail", "timeout"};

// Slurm's job names and partitions: no shell or sbatch syntax needed in them.
bool plain_word(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

void parse_slurm(const util::YamlField& field, SlurmSpec& slurm) {
  if (!field.expect_map()) {
    return;
  }
  field.check_keys(k_slurm_keys);
  for (auto [key, target] : {std::pair{"partition", &slurm.partition}, std::pair{"account", &slurm.account}}) {
    if (field[key].present()) {
      if (auto text = field[key].as_string()) {
        if (plain_word(*text)) {
          *target = *text;
        } else {
          field[key].error(fmt::format("\"{}\" is not a Slurm name (letters, digits, _ - .)", *text));
        }
      }
    }
  }
  if (field["gpus"].present()) {
    if (auto n = field["gpus"].as_int(1, 1024)) {
      slurm.gpus = static_cast<int>(*n);
    }
  }
  if (field["time_limit"].present()) {
    if (auto d = field["time_limit"].as_duration()) {
      if (*d < k_min_time_limit) {
        field["time_limit"].error("Slurm's time limits are whole minutes: at least 1m");
      } else {
        slurm.time_limit = *d;
      }
    }
  }
  for (auto [key, target] : {std::pair{"sbatch_args", &slurm.sbatch_args}, std::pair{"setup", &slurm.setup}}) {
    if (field[key].present()) {
      if (auto list = field[key].as_string_list()) {
        *target = *list;
      }
    }
  }
  for (const auto& arg :
       field["sbatch_args"].present() ? field["sbatch_args"].items() : std::vector<util::YamlField>{}) {
    auto text = arg.as_string();
    if (text && !text->starts_with("-")) {
      arg.error(fmt::format("\"{}\" is not an sbatch option (the script is specctl's own)", *text));
    }
  }
  if (field["login"].present()) {
    slurm.login = field["login"].as_string().value_or("");
  }
  if (field["work_dir"].present()) {
    slurm.work_dir = field["work_dir"].as_string();
  }
  if (field["specctl"].present()) {
    slurm.specctl = field["specctl"].as_string();
  }
  if (field["max_jobs"].present()) {
    slurm.max_jobs = static_cast<int>(field["max_jobs"].as_int(1, 10000).value_or(0));
  }
  if (field["poll"].present()) {
    if (auto d = field["poll"].as_duration()) {
      if (*d < k_min_slurm_poll) {
        field["poll"].error("poll at most every 100ms: Slurm's controller serves everyone");
      } else {
        slurm.poll = *d;
      }
    }
  }
  if (field["retry_on"].present() && field["retry_on"].expect_list()) {
    slurm.retry_on.clear();
    for (const auto& item : field["retry_on"].items()) {
      if (auto name = item.as_choice(k_retry_names)) {
        auto at = std::find(k_retry_names.begin(), k_retry_names.end(), *name) - k_retry_names.begin();
        slurm.retry_on.push_back(static_cast<SlurmRetry>(at));
      }
    }
  }
}

// [[0, 1, 2, 3], [4, 5, 6, 7]]: at least two slots, each of distinct GPUs no other slot has.
std::vector<std::vector<int>> parse_slots(const util::YamlField& field) {
  std::vector<std::vector<int>> slots;
  if (!field.expect_list()) {
    return slots;
  }
  std::vector<int> seen;
  for (const auto& item : field.items()) {
    if (!item.expect_list()) {
      continue;
    }
    std::vector<int> gpus;
    for (const auto& gpu : item.items()) {
      auto index = gpu.as_int(0, 1023);
      if (!index) {
        continue;
      }
      if (std::find(seen.begin(), seen.end(), *index) != seen.end()) {
        gpu.error(fmt::format("GPU {} is in two slots; slots share no GPU", *index));
        continue;
      }
      seen.push_back(static_cast<int>(*index));
      gpus.push_back(static_cast<int>(*index));
    }
    if (gpus.empty()) {
      item.error("an empty slot");
      continue;
    }
    slots.push_back(gpus);
  }
  if (slots.size() == 1) {
    field.error("one slot is the whole host: list two or more, or leave slots out");
    slots.clear();
  }
  return slots;
}

} // namespace

std::map<std::string, HostSpec> parse_hosts(const util::YamlField& hosts) {
  std::map<std::string, HostSpec> out;
  if (!hosts.present()) {
    HostSpec local;
    local.name = "local";
    out.emplace(local.name, local);
    return out;
  }
  if (!hosts.expect_map()) {
    return out;
  }
  hosts.check_duplicates();
  if (hosts.entries().empty()) {
    hosts.error("no hosts (leave hosts out to run on this machine)");
  }
  std::vector<std::pair<std::string, util::YamlField>> pools;
  std::vector<std::pair<std::string, util::YamlField>> slurms;
  std::vector<std::pair<std::string, util::YamlField>> ssh_fields;
  for (const auto& [name, name_at, field] : hosts.entries()) {
    HostSpec spec;
    spec.name = name;
    spec.where = name_at;
    if (!field.expect_map()) {
      continue;
    }
    field.check_keys(k_host_keys);
    if (field["pool"].present()) {
      for (const auto& key : k_connection_keys) {
        if (field[key].present()) {
          field[key].error("a pool takes only \"pool: [host, ...]\"; set this on its hosts");
        }
      }
      for (const char* key : {"local", "state_dir", "slots"}) {
        if (field[key].present()) {
          field[key].error("a pool takes only \"pool: [host, ...]\"; set this on its hosts");
        }
      }
      spec.kind = HostKind::pool;
      if (field["pool"].expect_list()) {
        for (const auto& item : field["pool"].items()) {
          // Type errors are reported once, when the members are checked below.
          if (item.node().IsScalar()) {
            spec.members.push_back(item.node().as<std::string>());
          }
        }
        if (spec.members.empty()) {
          field["pool"].error("an empty pool");
        }
      }
      pools.emplace_back(name, field);
      out.emplace(name, spec);
      continue;
    }
    if (field["slurm"].present()) {
      for (const auto& key : k_connection_keys) {
        if (field[key].present()) {
          field[key].error("a slurm host takes only \"slurm: {...}\"; the job runs on the node Slurm picks");
        }
      }
      for (const char* key : {"local", "state_dir", "slots"}) {
        if (field[key].present()) {
          field[key].error("a slurm host takes only \"slurm: {...}\"; the job runs on the node Slurm picks");
        }
      }
      spec.kind = HostKind::slurm;
      parse_slurm(field["slurm"], spec.slurm);
      slurms.emplace_back(name, field);
      out.emplace(name, spec);
      continue;
    }
    if (field["state_dir"].present()) {
      spec.state_dir = field["state_dir"].as_string();
    }
    if (field["slots"].present()) {
      spec.slots = parse_slots(field["slots"]);
    }
    bool local = field["local"].present() && field["local"].as_bool().value_or(false);
    bool ssh = field["ssh"].present();
    if (local == ssh) {
      field.error("a host is either {local: true} or {ssh: user@host[:port]}");
      continue;
    }
    if (local) {
      for (const char* key : {"identity", "host_key", "known_hosts", "jump", "transport"}) {
        if (field[key].present()) {
          field[key].error("only SSH hosts take this key");
        }
      }
      out.emplace(name, spec);
      continue;
    }
    if (parse_ssh_host(field, spec)) {
      ssh_fields.emplace_back(name, field);
    }
    out.emplace(name, spec);
  }
  resolve_jumps(out, ssh_fields);
  // A pool's members are machines defined above, each named once.
  for (const auto& [name, field] : pools) {
    std::vector<std::string> seen;
    for (const auto& item : field["pool"].items()) {
      auto member = item.as_string();
      if (!member) {
        continue;
      }
      auto it = out.find(*member);
      if (it == out.end()) {
        std::vector<std::string> names;
        for (const auto& [host, spec] : out) {
          names.push_back(host);
        }
        item.error(fmt::format("unknown host \"{}\"{}", *member, util::did_you_mean(*member, names)));
      } else if (it->second.kind == HostKind::pool) {
        item.error(fmt::format("\"{}\" is a pool; a pool holds hosts", *member));
      } else if (it->second.kind == HostKind::slurm) {
        item.error(fmt::format("\"{}\" is a Slurm cluster; Slurm picks its own nodes", *member));
      } else if (std::find(seen.begin(), seen.end(), *member) != seen.end()) {
        item.error(fmt::format("\"{}\" is listed twice", *member));
      }
      seen.push_back(*member);
    }
  }
  // A login node is an SSH (or local) host defined above; with one, the jobs'
  // files cannot default to this machine's result folder.
  for (const auto& [name, field] : slurms) {
    auto& slurm = out.at(name).slurm;
    if (!slurm.login.empty()) {
      auto it = out.find(slurm.login);
      auto login = field["slurm"]["login"];
      if (it == out.end()) {
        std::vector<std::string> names;
        for (const auto& [host, spec] : out) {
          names.push_back(host);
        }
        login.error(fmt::format("unknown host \"{}\"{}", slurm.login, util::did_you_mean(slurm.login, names)));
      } else if (it->second.kind == HostKind::pool || it->second.kind == HostKind::slurm) {
        login.error(fmt::format("\"{}\" is not a machine: the login node is a local or SSH host", slurm.login));
      } else if (it->second.kind == HostKind::ssh) {
        if (!slurm.work_dir) {
          field["slurm"].error("with an SSH login node, set work_dir: a folder on the cluster's shared filesystem");
        }
        if (!slurm.specctl) {
          field["slurm"].error("with an SSH login node, set specctl: the specctl the compute nodes run");
        }
      }
    }
  }
  return out;
}

} // namespace specctl::experiment::detail

namespace specctl::experiment {

std::string slot_name(const std::string& host, int index) {
  return fmt::format("{}#{}", host, index);
}

std::vector<std::string> hosts_for(const Experiment& experiment, const Variant& variant) {
  const std::string& host = variant.server.host;
  auto it = experiment.hosts.find(host);
  std::vector<std::string> machines = {host.empty() ? std::string("local") : host};
  if (it != experiment.hosts.end() && it->second.kind == HostKind::pool) {
    machines = it->second.members;
  }
  std::vector<std::string> nodes;
  for (const auto& machine : machines) {
    auto spec = experiment.hosts.find(machine);
    if (spec == experiment.hosts.end() || spec->second.slots.empty()) {
      nodes.push_back(machine);
      continue;
    }
    for (std::size_t k = 0; k < spec->second.slots.size(); ++k) {
      nodes.push_back(slot_name(machine, static_cast<int>(k)));
    }
  }
  return nodes;
}

std::optional<Slot> slot_of(const Experiment& experiment, const std::string& node) {
  auto hash = node.rfind('#');
  if (hash == std::string::npos || experiment.hosts.contains(node)) {
    return std::nullopt;
  }
  auto it = experiment.hosts.find(node.substr(0, hash));
  int index = -1;
  auto digits = node.substr(hash + 1);
  std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (it == experiment.hosts.end() || index < 0 || static_cast<std::size_t>(index) >= it->second.slots.size()) {
    return std::nullopt;
  }
  return Slot{it->first, index, static_cast<int>(it->second.slots.size()),
              it->second.slots[static_cast<std::size_t>(index)]};
}

server::ServerConfig Slot::server_in_slot(const server::ServerConfig& server) const {
  server::ServerConfig out = server;
  out.gpus = gpus;
  out.port += index;
  return out;
}

const HostSpec* machine_of(const Experiment& experiment, const std::string& node) {
  if (auto it = experiment.hosts.find(node); it != experiment.hosts.end()) {
    return &it->second;
  }
  if (auto slot = slot_of(experiment, node)) {
    return &experiment.hosts.at(slot->host);
  }
  return nullptr;
}

namespace {

// ", 2 GPU slots: 0,1,2,3 | 4,5,6,7", or nothing.
std::string slots_text(const std::vector<std::vector<int>>& slots) {
  if (slots.empty()) {
    return {};
  }
  std::vector<std::string> parts;
  for (const auto& slot : slots) {
    std::vector<std::string> ids;
    for (int gpu : slot) {
      ids.push_back(std::to_string(gpu));
    }
    parts.push_back(util::join(ids, ","));
  }
  return fmt::format(", {} GPU slots: {}", slots.size(), util::join(parts, " | "));
}

} // namespace

std::string HostSpec::describe() const {
  if (kind == HostKind::local) {
    return "local" + slots_text(slots);
  }
  if (kind == HostKind::slurm) {
    std::vector<std::string> parts;
    parts.push_back(slurm.partition ? "partition " + *slurm.partition : "default partition");
    if (slurm.account) {
      parts.push_back("account " + *slurm.account);
    }
    parts.push_back(slurm.gpus ? fmt::format("{} GPU{} per job", *slurm.gpus, *slurm.gpus == 1 ? "" : "s")
                               : "no GPUs requested");
    parts.push_back(slurm.time_limit ? "time limit " + util::format_duration(*slurm.time_limit)
                                     : "the partition's time limit");
    parts.push_back(slurm.login.empty() ? "sbatch here" : "sbatch on " + slurm.login);
    if (slurm.max_jobs > 0) {
      parts.push_back(fmt::format("at most {} jobs at once", slurm.max_jobs));
    }
    return "slurm: " + util::join(parts, ", ");
  }
  if (kind == HostKind::pool) {
    std::string out = "pool of ";
    for (std::size_t i = 0; i < members.size(); ++i) {
      out += (i == 0 ? "" : ", ") + members[i];
    }
    return out;
  }
  bool v6 = hostname.find(':') != std::string::npos;
  std::string target = fmt::format("{}@{}{}{}:{}", user, v6 ? "[" : "", hostname, v6 ? "]" : "", port);
  std::string out = "ssh " + target;
  if (ssh_alias) {
    out += fmt::format(" (alias {} from ssh config)", *ssh_alias);
  }
  out += identities.empty() ? ", keys from ssh-agent" : fmt::format(", key {}", util::join(identities, ", "));
  out += host_key == HostKeyPolicy::strict ? ", host key strict" : ", host key accept-new";
  if (transport == SshTransport::openssh) {
    out += ", through the system ssh";
  }
  if (!jumps.empty() || proxy_command) {
    out += ", route " + route();
  }
  return out + slots_text(slots);
}

} // namespace specctl::experiment
