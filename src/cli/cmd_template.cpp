#include "commands.hpp"

#include <specctl/util/bounded_read.hpp>

#include <specctl/server/log_replay.hpp>
#include <specctl/server/server_template.hpp>
#include <specctl/util/error.hpp>
#include <specctl/util/text_table.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

namespace specctl::cli {

namespace {

struct CheckArgs {
  std::string tmpl;
  std::string log;
  bool json = false;
};

std::shared_ptr<const server::ServerTemplate> load_or_throw(const std::string& name) {
  util::Diagnostics diag;
  auto tmpl = server::load_template(name, server::template_search_path("."), diag, {});
  for (const auto& d : diag.sorted()) {
    // A problem without a place (an unknown template) becomes the one error line below.
    if (tmpl || !d.where.file.empty()) {
      std::cerr << d.str() << '\n';
    }
  }
  if (!tmpl) {
    auto errors = diag.errors();
    if (errors.size() == 1 && errors.front().where.file.empty()) {
      throw Error(errors.front().message, ErrorKind::bad_input);
    }
    throw Error(fmt::format("template \"{}\" has {} error{}", name, errors.size(), errors.size() == 1 ? "" : "s"),
                ErrorKind::bad_input);
  }
  return tmpl;
}

std::string read_log(const std::string& path) {
  // A server log is capped as a journal is: 1 GiB.
  auto text = util::read_regular_file(path, util::k_max_journal_bytes, "a log to check");
  if (!text) {
    throw Error(fmt::format("{}: cannot read file: {}", path, text.error().reason), ErrorKind::bad_input);
  }
  return std::move(*text);
}

std::string number(double value) {
  return fmt::format("{:.2f}", value);
}

// Progress lines repeat (tqdm redraws, one bar per TP rank): show each change of the percentage.
std::vector<server::ReplayProgress> changes(const std::vector<server::ReplayProgress>& progress) {
  std::vector<server::ReplayProgress> out;
  for (const auto& p : progress) {
    if (out.empty() || out.back().percent != p.percent) {
      out.push_back(p);
    }
  }
  return out;
}

void print_text(const server::ServerTemplate& tmpl, const std::string& log, const server::LogReplay& replay) {
  std::cout << fmt::format("template: {} ({})\n", tmpl.name, tmpl.file);
  std::cout << fmt::format("log:      {} ({} line{})\n", log, replay.lines, replay.lines == 1 ? "" : "s");
  std::cout << "progress:";
  if (replay.progress.empty()) {
    std::cout << (tmpl.log.progress ? " none\n" : " none (the template has no progress pattern)\n");
  } else {
    std::cout << '\n';
    for (const auto& p : changes(replay.progress)) {
      std::string counts = p.done && p.total ? fmt::format("  {}/{}", *p.done, *p.total) : "";
      std::cout << fmt::format("  line {}: {:.0f}%{}\n", p.line, p.percent, counts);
    }
  }
  std::cout << "milestones:";
  if (replay.milestones.empty()) {
    std::cout << " none\n";
  } else {
    std::cout << '\n';
    for (const auto& m : replay.milestones) {
      std::string times = m.count > 1 ? fmt::format(" (x{})", m.count) : "";
      std::cout << fmt::format("  line {}: {}{}\n", m.first_line, m.name, times);
    }
  }
  std::cout << (replay.ready_line ? fmt::format("ready:    line {}\n", *replay.ready_line) : "ready:    never\n");
  if (replay.fatal) {
    std::cout << fmt::format("fatal:    line {}, pattern \"{}\"\n", replay.fatal->line, replay.fatal->pattern_text);
    std::cout << fmt::format("          {}\n", replay.fatal->text);
    if (replay.first_fatal_line && *replay.first_fatal_line != replay.fatal->line) {
      std::cout << fmt::format("          (the first fatal line was line {})\n", *replay.first_fatal_line);
    }
  } else {
    std::cout << "fatal:    none\n";
  }
  std::cout << "metrics:";
  if (replay.metrics.empty()) {
    std::cout << " none\n";
  } else {
    util::TextTable table({{"metric"},
                           {"samples", util::Align::right},
                           {"mean", util::Align::right},
                           {"min", util::Align::right},
                           {"max", util::Align::right}});
    for (const auto& m : replay.metrics) {
      table.add_row({m.name, std::to_string(m.samples), number(m.mean), number(m.min), number(m.max)});
    }
    std::cout << '\n' << table.markdown();
  }
  std::cout << "verdict:  " << replay.verdict_line << '\n';
}

void print_json(const server::ServerTemplate& tmpl, const std::string& log, const server::LogReplay& replay) {
  using nlohmann::ordered_json;
  ordered_json progress = ordered_json::array();
  for (const auto& p : replay.progress) {
    progress.push_back({{"line", p.line},
                        {"percent", p.percent},
                        {"done", p.done ? ordered_json(*p.done) : ordered_json()},
                        {"total", p.total ? ordered_json(*p.total) : ordered_json()}});
  }
  ordered_json milestones = ordered_json::array();
  for (const auto& m : replay.milestones) {
    milestones.push_back({{"name", m.name}, {"line", m.first_line}, {"count", m.count}});
  }
  ordered_json fatal;
  if (replay.fatal) {
    fatal = {{"line", replay.fatal->line},
             {"text", replay.fatal->text},
             {"pattern", replay.fatal->pattern_text},
             {"first_line", replay.first_fatal_line ? *replay.first_fatal_line : replay.fatal->line}};
  }
  ordered_json metrics = ordered_json::object();
  for (const auto& m : replay.metrics) {
    metrics[m.name] = {{"samples", m.samples}, {"mean", m.mean}, {"min", m.min}, {"max", m.max}};
  }
  const char* verdict = replay.verdict == server::ReplayVerdict::ready    ? "ready"
                        : replay.verdict == server::ReplayVerdict::failed ? "failed"
                                                                          : "no_verdict";
  ordered_json out = {{"template", tmpl.name},
                      {"template_file", tmpl.file},
                      {"log", log},
                      {"lines", replay.lines},
                      {"progress", progress},
                      {"milestones", milestones},
                      {"ready_line", replay.ready_line ? ordered_json(*replay.ready_line) : ordered_json()},
                      {"fatal", fatal},
                      {"metrics", metrics},
                      {"verdict", verdict},
                      {"verdict_line", replay.verdict_line}};
  std::cout << out.dump(2) << '\n';
}

} // namespace

Action setup_template(CLI::App& command) {
  command.require_subcommand(1);
  auto args = std::make_shared<CheckArgs>();
  CLI::App* check = command.add_subcommand(
      "check", "Replay a server log through a template: progress, milestones, ready, the fatal line, metrics");
  check->add_option("TEMPLATE", args->tmpl, "A template name (sglang) or a template file (./engine.yaml)")->required();
  check->add_option("LOGFILE", args->log, "A server log, e.g. a run's server.log")->required();
  check->add_flag("--json", args->json, "Print the replay as JSON");
  check->footer("Exit 0 when the log reached ready, 1 when a fatal line fired or it never got ready, 2 on bad "
                "input.\nReady here is the ready line alone; a run also waits for the health check.");
  return [args] {
    auto tmpl = load_or_throw(args->tmpl);
    const std::string text = read_log(args->log);
    const auto replay = server::replay_log(*tmpl, text);
    if (args->json) {
      print_json(*tmpl, args->log, replay);
    } else {
      print_text(*tmpl, args->log, replay);
    }
    return replay.verdict == server::ReplayVerdict::ready ? k_exit_ok : k_exit_failures;
  };
}

} // namespace specctl::cli
