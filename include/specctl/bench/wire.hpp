#pragma once

// Bench results as lossless JSON, for a benchmark that ran on another machine
// (`specctl bench-job` on the GPU node) and is read back by `specctl run`: every
// field of every level and request, so the reader rebuilds the same structs the
// engine returned. Not the report format (bench/report.hpp): that one rounds
// nothing either, but leaves out records and writes NaN as null; this one keeps
// NaN and infinity apart ("nan", "inf", "-inf").

#include <specctl/bench/bench.hpp>
#include <specctl/bench/result.hpp>

#include <nlohmann/json.hpp>

namespace specctl::bench {

nlohmann::json to_wire(const RequestRecord& record);
nlohmann::json to_wire(const LevelResult& level);
nlohmann::json to_wire(const SingleStreamResult& result);
nlohmann::json to_wire(const ConcurrencyResult& result);
nlohmann::json to_wire(const RateResult& result);
nlohmann::json to_wire(const Progress& progress);

// The inverses. Throw specctl::Error (failed) naming the field that is missing
// or of the wrong type. LevelResult::started, a steady-clock reading of the
// machine that measured, is not carried: it is the reader's now minus the
// level's duration.
RequestRecord record_from_wire(const nlohmann::json& json);
LevelResult level_from_wire(const nlohmann::json& json);
SingleStreamResult single_stream_from_wire(const nlohmann::json& json);
ConcurrencyResult concurrency_from_wire(const nlohmann::json& json);
RateResult rate_from_wire(const nlohmann::json& json);
Progress progress_from_wire(const nlohmann::json& json);

// "normally", "interrupted", "timed_out" and back (unknown text: normally).
std::string_view ended_name(Ended ended);
Ended ended_from_name(std::string_view name);

} // namespace specctl::bench
