// The run journal as a resumed run reads it (DIR/journal.jsonl): its entries,
// then the Slurm jobs they name and the ones left unfinished. Then the
// journal is continued, as `run --resume` does, and read again: the entry
// just recorded must come back whole, whatever torn line the input ends with.

#include "fuzz_support.hpp"

#include "../src/run/run_context.hpp"

#include <specctl/run/journal.hpp>
#include <specctl/util/error.hpp>

#include <cstdlib>

using namespace specctl;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > fuzz::k_max_input) {
    return -1;
  }
  static const auto dir = fuzz::ScratchDir::path() / "run";
  fuzz::write_file(dir / run::Journal::k_file_name, fuzz::as_text(data, size));
  try {
    int torn = 0;
    auto entries = run::read_journal(dir, &torn);
    for (const auto& entry : entries) {
      if (!entry.is_object()) {
        std::abort();
      }
    }
    (void)run::detail::journaled_slurm_jobs(entries);
    for (const auto& [variant, adoption] : run::detail::unfinished_slurm_jobs(entries)) {
      if (adoption.job_id.empty() || adoption.job_dir.empty()) {
        std::abort();
      }
    }

    {
      run::Journal journal(dir);
      journal.record("fuzz_resumed", {{"variant", "baseline"}});
    }
    auto again = run::read_journal(dir);
    if (again.size() != entries.size() + 1 || again.back().value("event", "") != "fuzz_resumed") {
      std::abort();
    }
  } catch (const Error&) {
    // specctl's one error type is a clean refusal; anything else escapes and is a finding.
  }
  return 0;
}
