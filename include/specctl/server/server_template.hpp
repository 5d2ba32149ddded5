#pragma once

#include <specctl/server/accept_source.hpp>
#include <specctl/util/diagnostics.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace specctl::server {

enum class KnobType { boolean, integer, number, string, choice, list };

// How a list knob becomes flags: `--f 1 2 4` (spread), `--f 1 --f 2` (repeat) or `--f 1,2,4` (comma).
enum class ListStyle { spread, repeat, comma };

// A knob's spelling from one engine version on (`since: {"0.5.16": {flag: ...}}`) or below it
// (`before: {"0.13.0": {path: ...}}`), for flags and JSON keys an engine renamed. A bool's words
// may be several (`--x-backend auto`); a valued knob's flag is one word, followed by the value;
// a JSON-valued knob renames its path. A key left out keeps the base spelling.
struct VersionedFlags {
  std::string since; // the rule's version as written, "0.5.16"
  std::vector<long> since_parts;
  std::optional<std::vector<std::string>> flag;
  std::optional<std::vector<std::string>> flag_false;
  std::optional<std::string> json_path;
  util::Location where;
};

// One tunable of an engine and how it becomes command-line flags or environment.
struct KnobDef {
  std::string name;
  KnobType type = KnobType::string;
  std::string help;
  // Used in generated variant names: spec_steps with short "steps" gives "eagle3-steps3".
  std::string short_name;
  std::optional<double> min;
  std::optional<double> max;
  // For choices: user value -> rendered value, in the template's order.
  std::vector<std::pair<std::string, std::string>> choices;

  // Exactly one way of rendering is set.
  std::optional<std::string> flag;       // valued flag; for booleans: given when true
  std::optional<std::string> flag_false; // booleans: given when false
  std::optional<std::string> json_flag;  // contributes to one JSON-valued flag...
  std::string json_path;                 // ...at this dotted path
  std::optional<std::string> env;        // rendered into the environment instead
  ListStyle list_style = ListStyle::spread;
  // Other spellings by engine version, each list oldest first. `since`: from that version on
  // (the base spelling is the oldest, and the one used when the version is unknown).
  // `before`: below that version (the base is the newest, used when it is unknown).
  std::vector<VersionedFlags> since;
  std::vector<VersionedFlags> before;

  bool versioned() const { return !since.empty() || !before.empty(); }

  // When unset but `derive_from` is set, this knob is derive_from + derive_add.
  std::optional<std::string> derive_from;
  std::int64_t derive_add = 0;

  util::Location where;
};

struct ProgressPattern {
  std::string pattern;
  int percent_group = 0;
  int done_group = 0;
  int total_group = 0;
};

// Regular expressions (ECMAScript) matched against log lines with ANSI codes removed.
struct LogPatterns {
  std::vector<std::string> ready;
  std::vector<std::string> fatal;
  std::optional<ProgressPattern> progress;
  std::vector<std::string> milestones;
  // metric name -> pattern with one capture group holding a number.
  std::vector<std::pair<std::string, std::string>> metrics;
};

// A server engine described as data (templates/*.yaml): adding an engine adds a file, not C++.
struct ServerTemplate {
  std::string name;
  std::string file;
  std::string description;
  // Words of the launch command; "{model}", "{listen}", "{port}" and "{specctl_bindir}" are filled in.
  std::vector<std::string> command;
  int default_port = 8000;
  std::string health_path = "/health";
  std::vector<std::string> version_command;
  // The program that answers as nvidia-smi on the host, for GPU telemetry (placeholders
  // as in `command`); empty: no telemetry.
  std::vector<std::string> telemetry_command{"nvidia-smi"};
  // DCGM's dcgmi, to sample with `dcgmi dmon` instead of nvidia-smi (placeholders as
  // in `command`); empty (the default): nvidia-smi. Where dcgmi is missing or its dmon
  // fails (no host engine), nvidia-smi samples, with a warning.
  std::vector<std::string> dcgmi_command;
  std::vector<std::string> overridden_env;
  std::vector<std::string> process_names;
  std::vector<KnobDef> knobs;
  LogPatterns log;
  // Where a benchmark window's accept length comes from, best first (empty: the
  // log metric "accept_length", averaged over lines).
  std::vector<AcceptSource> accept_length;
  // Hash of the template file(s), recorded in provenance.
  std::string content_hash;

  const KnobDef* find_knob(const std::string& name) const;
  std::vector<std::string> knob_names() const;
};

// Where templates are looked for, in order: next to the experiment file (DIR/templates),
// then $SPECCTL_TEMPLATE_PATH (colon-separated), then ~/.config/specctl/templates, then the
// installed templates.
std::vector<std::string> template_search_path(const std::string& experiment_dir);

// Finds a template by name ("sglang") or by path ("./my-engine.yaml"), loads and checks it.
// Problems inside the template are reported against the template's own file.
std::shared_ptr<const ServerTemplate> load_template(const std::string& name_or_path,
                                                    const std::vector<std::string>& search_path,
                                                    util::Diagnostics& diag, const util::Location& asked_at);

// Names of the templates found on the search path, for did-you-mean.
std::vector<std::string> available_templates(const std::vector<std::string>& search_path);

} // namespace specctl::server
