#include "layer.hpp"

#include <specctl/util/text.hpp>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace specctl::experiment::detail {

namespace {

constexpr std::int64_t k_max_int_knob = 1'000'000'000;

const util::YamlField* find(const Layer& layer, const std::string& key) {
  auto it = layer.find(key);
  if (it == layer.end() || !it->second.value.present()) {
    return nullptr;
  }
  return &it->second.value;
}

bool in_range(const server::KnobDef& def, double value, const util::YamlField& field) {
  if ((def.min && value < *def.min) || (def.max && value > *def.max)) {
    field.error(fmt::format("{} is out of range for knob \"{}\" ({})", value, def.name, knob_limits(def)));
    return false;
  }
  return true;
}

// Whether a variant on `host` runs in GPU slots: the host has them, or a member of its pool does.
bool sliced(const HostSpec& host, const std::map<std::string, HostSpec>& hosts) {
  if (!host.slots.empty()) {
    return true;
  }
  return std::any_of(host.members.begin(), host.members.end(), [&](const std::string& member) {
    auto it = hosts.find(member);
    return it != hosts.end() && !it->second.slots.empty();
  });
}

} // namespace

std::string knob_limits(const server::KnobDef& def) {
  auto number = [](double v) { return fmt::format("{}", v); };
  if (def.min && def.max) {
    return fmt::format("{}..{}", number(*def.min), number(*def.max));
  }
  if (def.min) {
    return fmt::format(">= {}", number(*def.min));
  }
  return fmt::format("<= {}", number(*def.max));
}

std::shared_ptr<const server::ServerTemplate> find_template(const util::YamlField& field, const ResolveContext& ctx) {
  auto name = field.as_string();
  if (!name) {
    return nullptr;
  }
  auto cached = ctx.template_cache->find(*name);
  if (cached != ctx.template_cache->end()) {
    return cached->second;
  }
  auto tmpl = server::load_template(*name, ctx.template_search_path, *ctx.diag, field.location());
  ctx.template_cache->emplace(*name, tmpl);
  return tmpl;
}

std::optional<nlohmann::json> type_knob(const server::KnobDef& def, const util::YamlField& value) {
  switch (def.type) {
  case server::KnobType::boolean:
    if (auto b = value.as_bool()) {
      return nlohmann::json(*b);
    }
    return std::nullopt;
  case server::KnobType::integer:
    if (auto i = value.as_int(-k_max_int_knob, k_max_int_knob); i && in_range(def, static_cast<double>(*i), value)) {
      return nlohmann::json(*i);
    }
    return std::nullopt;
  case server::KnobType::number:
    if (auto d = value.as_number(); d && in_range(def, *d, value)) {
      return nlohmann::json(*d);
    }
    return std::nullopt;
  case server::KnobType::string:
    if (auto s = value.as_string()) {
      return nlohmann::json(*s);
    }
    return std::nullopt;
  case server::KnobType::choice: {
    std::vector<std::string> names;
    for (const auto& [user, rendered] : def.choices) {
      names.push_back(user);
    }
    if (auto c = value.as_choice(names)) {
      return nlohmann::json(*c);
    }
    return std::nullopt;
  }
  case server::KnobType::list: {
    if (!value.present()) {
      return std::nullopt;
    }
    if (value.is_scalar()) {
      // One value where a list is expected is still a list.
      return nlohmann::json::array({value.node().Scalar()});
    }
    if (auto list = value.as_string_list()) {
      return nlohmann::json(*list);
    }
    return std::nullopt;
  }
  }
  return std::nullopt;
}

ServerConfig resolve_server(const Layer& layer, const ResolveContext& ctx, const util::Location& owner_at,
                            const std::string& owner) {
  ServerConfig config;
  auto& diag = *ctx.diag;

  if (const auto* field = find(layer, "template")) {
    config.tmpl = find_template(*field, ctx);
  } else if (!ctx.server_block_broken) {
    diag.error(owner_at, fmt::format("{}: no template (set server.template, e.g. sglang or vllm)", owner));
  }

  if (const auto* field = find(layer, "host")) {
    if (auto host = field->as_string()) {
      if (ctx.hosts->count(*host) == 0) {
        std::vector<std::string> names;
        for (const auto& [name, spec] : *ctx.hosts) {
          names.push_back(name);
        }
        field->error(fmt::format("unknown host \"{}\"{}; hosts: {}", *host, util::did_you_mean(*host, names),
                                 util::join(names, ", ")));
      }
      config.host = *host;
    }
  } else if (ctx.hosts->size() == 1) {
    config.host = ctx.hosts->begin()->first;
  } else if (ctx.hosts->size() > 1) {
    diag.error(owner_at, fmt::format("{}: no host (several hosts are defined: set server.host)", owner));
  }

  if (const auto* field = find(layer, "model")) {
    config.model = field->as_string().value_or("");
  } else if (!ctx.server_block_broken) {
    diag.error(owner_at, fmt::format("{}: no model (set server.model or the variant's model)", owner));
  }

  if (const auto* field = find(layer, "port")) {
    config.port = static_cast<int>(field->as_int(1, 65535).value_or(0));
  } else if (config.tmpl) {
    config.port = config.tmpl->default_port;
  }
  if (const auto* field = find(layer, "listen")) {
    config.listen = field->as_string().value_or(config.listen);
  }
  if (const auto* field = find(layer, "args")) {
    config.extra_args = field->as_string_list().value_or(std::vector<std::string>{});
  }
  if (const auto* field = find(layer, "gpus")) {
    auto host = ctx.hosts->find(config.host);
    if (host != ctx.hosts->end() && host->second.kind == HostKind::slurm) {
      field->error(fmt::format("the GPUs of a job on \"{}\" come from Slurm's allocation; ask for a count with "
                               "hosts.{}.slurm.gpus",
                               config.host, config.host));
    } else if (host != ctx.hosts->end() && sliced(host->second, *ctx.hosts)) {
      field->error(fmt::format("\"{}\" is split into GPU slots: each variant gets the GPUs of the slot it runs in",
                               config.host));
    } else if (field->expect_list()) {
      std::vector<int> gpus;
      for (const auto& item : field->items()) {
        if (auto index = item.as_int(0, 1023)) {
          if (std::find(gpus.begin(), gpus.end(), *index) != gpus.end()) {
            item.error(fmt::format("GPU {} is listed twice", *index));
          }
          gpus.push_back(static_cast<int>(*index));
        }
      }
      if (gpus.empty()) {
        field->error("the list of GPUs is empty");
      }
      config.gpus = gpus;
    }
  }
  if (const auto* field = find(layer, "warmup_timeout")) {
    config.warmup_timeout = field->as_duration().value_or(config.warmup_timeout);
  }
  if (const auto* field = find(layer, "log_keep")) {
    if (auto mib = field->as_size_mib()) {
      if (*mib < 2) {
        field->error("log_keep: keep at least 2MiB of the server log (its first MiB and some of its end)");
      } else {
        config.log_keep_mib = *mib;
      }
    }
  }

  // Environment, then CUDA_VISIBLE_DEVICES from `gpus`.
  for (const auto& [key, entry] : layer) {
    if (!key.starts_with("env.") || !entry.value.present()) {
      continue;
    }
    std::string name = key.substr(4);
    if (name == "CUDA_VISIBLE_DEVICES" && config.gpus) {
      diag.error(entry.key_at,
                 fmt::format("{}: set either gpus or env.CUDA_VISIBLE_DEVICES, not both", entry.value.path()));
    }
    if (name == "CUDA_VISIBLE_DEVICES" && ctx.hosts->contains(config.host) &&
        sliced(ctx.hosts->at(config.host), *ctx.hosts)) {
      diag.error(entry.key_at,
                 fmt::format("{}: \"{}\" is split into GPU slots, which set it", entry.value.path(), config.host));
    }
    if (name == "CUDA_VISIBLE_DEVICES" && ctx.hosts->contains(config.host) &&
        ctx.hosts->at(config.host).kind == HostKind::slurm) {
      diag.error(entry.key_at,
                 fmt::format("{}: a job on \"{}\" uses the GPUs Slurm allocates", entry.value.path(), config.host));
    }
    if (entry.value.expect_scalar()) {
      config.env.emplace_back(name, entry.value.node().Scalar());
    }
  }

  auto duration = [&](const char* key, util::Duration& out) {
    if (const auto* field = find(layer, key)) {
      out = field->as_duration().value_or(out);
      if (out <= util::Duration::zero()) {
        field->error("must be longer than zero");
      }
    }
  };
  duration("health.timeout", config.health.timeout);
  duration("health.interval", config.health.interval);
  duration("health.stall", config.health.stall);
  if (const auto* field = find(layer, "health.path")) {
    config.health.path = field->as_string();
    if (config.health.path && !config.health.path->starts_with("/")) {
      field->error(fmt::format("the health path must start with \"/\", got \"{}\"", *config.health.path));
    }
  }
  if (config.health.interval > config.health.timeout) {
    const auto* field = find(layer, "health.interval");
    diag.error(field != nullptr ? field->location() : owner_at,
               fmt::format("{}: health.interval ({}) is longer than health.timeout ({})", owner,
                           util::format_duration(config.health.interval),
                           util::format_duration(config.health.timeout)));
  }

  if (const auto* field = find(layer, "cleanup.policy")) {
    auto policy = field->as_choice({"kill", "wait", "fail"}).value_or("kill");
    config.cleanup.policy = policy == "wait"   ? server::CleanupPolicy::wait
                            : policy == "fail" ? server::CleanupPolicy::fail
                                               : server::CleanupPolicy::kill;
  }
  if (const auto* field = find(layer, "cleanup.busy")) {
    config.cleanup.busy = field->as_choice({"fail", "wait"}).value_or("fail") == "wait" ? server::BusyPolicy::wait
                                                                                        : server::BusyPolicy::fail;
  }
  if (const auto* field = find(layer, "cleanup.allow")) {
    config.cleanup.allow = field->as_string_list().value_or(std::vector<std::string>{});
  } else if (config.tmpl) {
    config.cleanup.allow = config.tmpl->process_names;
  }
  if (const auto* field = find(layer, "cleanup.gpu_free_below")) {
    config.cleanup.gpu_free_below_mib = field->as_size_mib().value_or(config.cleanup.gpu_free_below_mib);
  }
  duration("cleanup.grace", config.cleanup.grace);
  duration("cleanup.timeout", config.cleanup.timeout);

  // Knobs are typed by the template, so they wait until the template is known.
  if (config.tmpl) {
    const auto& tmpl = *config.tmpl;
    for (const auto& [key, entry] : layer) {
      if (!key.starts_with("knobs.")) {
        continue;
      }
      std::string name = key.substr(6);
      const auto* def = tmpl.find_knob(name);
      if (def == nullptr) {
        diag.error(entry.key_at, fmt::format("{}: template \"{}\" has no knob \"{}\"{}", entry.value.path(), tmpl.name,
                                             name, util::did_you_mean(name, tmpl.knob_names())));
        continue;
      }
      if (!entry.value.present()) {
        continue;
      }
      if (auto value = type_knob(*def, entry.value)) {
        config.knobs[name] = server::KnobSetting{*value, entry.value.location(), false};
      }
    }
    for (const auto& def : tmpl.knobs) {
      if (!def.derive_from || config.knobs.count(def.name) > 0) {
        continue;
      }
      auto from = config.knobs.find(*def.derive_from);
      if (from != config.knobs.end() && from->second.value->is_number_integer()) {
        config.knobs[def.name] = server::KnobSetting{
            nlohmann::json(from->second.value->get<std::int64_t>() + def.derive_add), from->second.where, true};
      }
    }
    auto tp = config.knobs.find("tp");
    if (tp != config.knobs.end() && config.gpus && tp->second.value->is_number_integer() &&
        tp->second.value->get<std::int64_t>() > static_cast<std::int64_t>(config.gpus->size())) {
      diag.error(tp->second.where,
                 fmt::format("{}: tp {} needs {} GPUs, but gpus lists {}", owner, tp->second.value->get<std::int64_t>(),
                             tp->second.value->get<std::int64_t>(), config.gpus->size()));
    }
    // Each slot the variant may land in must hold its tensor-parallel ranks.
    auto host = ctx.hosts->find(config.host);
    if (tp != config.knobs.end() && tp->second.value->is_number_integer() && host != ctx.hosts->end()) {
      std::vector<const HostSpec*> machines = {&host->second};
      for (const auto& member : host->second.members) {
        if (auto it = ctx.hosts->find(member); it != ctx.hosts->end()) {
          machines.push_back(&it->second);
        }
      }
      auto want = tp->second.value->get<std::int64_t>();
      for (const auto* machine : machines) {
        for (std::size_t k = 0; k < machine->slots.size(); ++k) {
          if (want > static_cast<std::int64_t>(machine->slots[k].size())) {
            diag.error(tp->second.where, fmt::format("{}: tp {} needs {} GPUs, but slot {} of {} has {}", owner, want,
                                                     want, k, machine->name, machine->slots[k].size()));
          }
        }
      }
    }
  }
  return config;
}

} // namespace specctl::experiment::detail
