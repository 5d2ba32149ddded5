#include "run_context.hpp"

#include <specctl/report/result_writer.hpp>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <set>
#include <thread>

namespace specctl::run::detail {

namespace {

// Idle workers look at the queue at least this often: for a retry's backoff
// running out, and for Ctrl-C.
constexpr auto k_idle_poll = std::chrono::milliseconds{250};
// A pool member that fails this many variants in a row for reasons of its own
// (unreachable, GPUs never freed) is taken out of the pool.
constexpr int k_node_failures = 2;

struct Item {
  Job job;
  int attempt = 1;
  // Pool members that already failed this variant; others are tried first.
  std::set<std::string> avoid;
  Clock::time_point not_before{};
};

struct NodeState {
  int failures_in_a_row = 0;
  bool out = false;
};

class Scheduler {
public:
  Scheduler(const VariantContext& context, std::vector<Job> jobs, int total, const FinishedFn& finished)
      : m_c(context), m_total(total), m_finished(finished) {
    for (auto& job : jobs) {
      for (const auto& node : candidates(job)) {
        if (!m_nodes.contains(node)) {
          m_nodes[node] = {};
          m_order.push_back(node);
        }
      }
      Item item;
      item.attempt = job.adopt ? job.adopt->attempt : 1;
      item.job = job;
      m_queue.push_back(std::move(item));
    }
  }

  // Whether the sweep was interrupted (Ctrl-C, SIGTERM, SIGHUP, or a variant interrupted).
  bool run() {
    // Counted before the first worker starts: a worker takes items off the queue, and a
    // count made after that (it was once the loop's condition) started fewer workers
    // than variants, so a Slurm sweep ran its third job only when the first ended.
    std::vector<std::pair<std::string, int>> counts;
    for (const auto& node : m_order) {
      counts.emplace_back(node, workers_for(node));
    }
    std::vector<std::thread> workers;
    for (const auto& [node, count] : counts) {
      for (int k = 0; k < count; ++k) {
        workers.emplace_back([this, node] { work(node); });
      }
    }
    for (auto& w : workers) {
      w.join();
    }
    return m_interrupted;
  }

private:
  // How many variants a scheduler node runs at once: one per machine or GPU
  // slot; a Slurm cluster as many jobs as its max_jobs allows (all by default).
  int workers_for(const std::string& node) const {
    auto it = m_c.experiment.hosts.find(node);
    if (it == m_c.experiment.hosts.end() || it->second.kind != experiment::HostKind::slurm) {
      return 1;
    }
    int jobs = static_cast<int>(std::count_if(m_queue.begin(), m_queue.end(), [&](const Item& item) {
      auto all = candidates(item.job);
      return std::find(all.begin(), all.end(), node) != all.end();
    }));
    int max_jobs = it->second.slurm.max_jobs;
    return std::max(1, max_jobs > 0 ? std::min(max_jobs, jobs) : jobs);
  }

  Attempted attempt(const std::string& node, const Item& item) {
    const auto& job = item.job;
    auto it = m_c.experiment.hosts.find(node);
    if (it != m_c.experiment.hosts.end() && it->second.kind == experiment::HostKind::slurm) {
      return run_slurm_variant(m_c, *job.planned, it->second, job.index, m_total, item.attempt, job.adopt);
    }
    return run_variant(m_c, *job.planned, node, job.index, m_total, item.attempt);
  }

  std::vector<std::string> candidates(const Job& job) const {
    return experiment::hosts_for(m_c.experiment, *job.planned->variant);
  }

  std::vector<std::string> live_candidates(const Job& job) const {
    auto all = candidates(job);
    std::erase_if(all, [&](const std::string& node) { return m_nodes.at(node).out; });
    return all;
  }

  bool stop_requested() const { return m_c.options.stop != nullptr && m_c.options.stop->load(); }

  // The first queued item this node may take now, preferring nodes that have
  // not failed it yet.
  std::optional<std::size_t> pick(const std::string& node) const {
    auto now = Clock::now();
    for (std::size_t i = 0; i < m_queue.size(); ++i) {
      const Item& item = m_queue[i];
      auto live = live_candidates(item.job);
      if (std::find(live.begin(), live.end(), node) == live.end() || now < item.not_before) {
        continue;
      }
      bool fresh_elsewhere =
          std::any_of(live.begin(), live.end(), [&](const auto& n) { return !item.avoid.contains(n); });
      if (item.avoid.contains(node) && fresh_elsewhere) {
        continue;
      }
      return i;
    }
    return std::nullopt;
  }

  void work(const std::string& node) {
    std::unique_lock lock(m_mutex);
    for (;;) {
      if (stop_requested()) {
        m_stopping = true;
        m_interrupted = true;
      }
      // A run that cannot write its results launches nothing more.
      if (m_c.failures.any()) {
        m_stopping = true;
      }
      if (m_stopping || m_nodes.at(node).out || (m_queue.empty() && m_running == 0)) {
        m_changed.notify_all();
        return;
      }
      auto at = pick(node);
      if (!at) {
        m_changed.wait_for(lock, k_idle_poll);
        continue;
      }
      Item item = m_queue[*at];
      m_queue.erase(m_queue.begin() + static_cast<std::ptrdiff_t>(*at));
      ++m_running;
      lock.unlock();
      const std::string& name = item.job.planned->variant->name;
      m_c.journal.record(
          "variant_started",
          {{"variant", name}, {"attempt", item.attempt}, {"index", item.job.index}, {"of", m_total}, {"host", node}});
      Attempted attempted = attempt(node, item);
      lock.lock();
      --m_running;
      settle(node, std::move(item), std::move(attempted));
      m_changed.notify_all();
    }
  }

  // What happens after an attempt: a result, a retry, or a node taken out. Called locked.
  void settle(const std::string& node, Item item, Attempted attempted) {
    const std::string name = item.job.planned->variant->name;
    auto& result = attempted.result;
    const auto status = result.status();
    const std::string reason = result.doc().value("reason", "");
    if (status == report::VariantStatus::interrupted) {
      m_interrupted = true;
      m_stopping = true;
      m_finished(result);
      return;
    }
    bool pooled = candidates(item.job).size() > 1;
    const auto& doc = result.doc();
    std::string phase =
        doc.contains("failure") && doc["failure"].is_object() ? doc["failure"].value("phase", "") : std::string();
    // The node's own fault rather than the variant's: the same variant may work elsewhere.
    bool node_fault = status != report::VariantStatus::ok && (attempted.transient || (pooled && phase == "cleanup"));
    // "In a row": a variant that ended for its own reasons clears the node's record.
    auto& state = m_nodes.at(node);
    state.failures_in_a_row = node_fault ? state.failures_in_a_row + 1 : 0;
    bool remove = node_fault && pooled && state.failures_in_a_row >= k_node_failures;
    if (remove) {
      state.out = true;
    }
    const RetryPolicy policy = retry_policy(m_c.options);
    const int attempts = policy.attempts();
    auto live = live_candidates(item.job);
    if (node_fault && item.attempt < attempts && !live.empty() && !stop_requested()) {
      item.avoid.insert(node);
      bool elsewhere = std::any_of(live.begin(), live.end(), [&](const auto& n) { return !item.avoid.contains(n); });
      // Another node may take it at once; the same node only after a backoff.
      auto backoff = elsewhere ? util::Duration{0} : policy.wait_before(item.attempt + 1);
      m_c.display.message(
          name, Severity::warning,
          fmt::format("{}; trying again{}{} (attempt {} of {})", reason, elsewhere ? " on another host" : "",
                      backoff.count() > 0 ? " in " + util::format_duration(backoff) : "", item.attempt + 1, attempts));
      m_c.journal.record("variant_retry",
                         {{"variant", name}, {"attempt", item.attempt}, {"host", node}, {"reason", reason}});
      m_c.pool.drop(node);
      item.attempt += 1;
      // A job an earlier run left is followed once; a retry submits anew.
      item.job.adopt.reset();
      item.not_before = Clock::now() + std::chrono::duration_cast<Clock::duration>(backoff);
      m_queue.push_front(std::move(item));
    } else {
      m_finished(result);
      // Read again: the finished result may be failed by its share of failed requests.
      if (result.status() != report::VariantStatus::ok && m_c.options.fail_fast) {
        m_c.display.message(name, Severity::error, "stopping the sweep: --fail-fast");
        m_stopping = true;
      }
    }
    // After the variant's own outcome is told, so the messages read in order.
    if (remove) {
      take_out(node, reason.empty() ? std::string(report::status_name(status)) : reason);
    }
  }

  // Announces a node taken out of the sweep; queued variants left with no host
  // fail with the reason. Called locked, after the node was marked out.
  void take_out(const std::string& node, const std::string& reason) {
    m_c.display.message(
        "", Severity::error,
        fmt::format("taking {} out of the pool: {} failures in a row (last: {})", node, k_node_failures, reason));
    m_c.journal.record("host_removed", {{"host", node}, {"reason", reason}});
    for (auto it = m_queue.begin(); it != m_queue.end();) {
      if (!live_candidates(it->job).empty()) {
        ++it;
        continue;
      }
      const auto& variant = *it->job.planned->variant;
      report::ResultWriter result(
          {variant.name, variant.description, node, it->attempt, utc_timestamp(std::chrono::system_clock::now())});
      result.fail("connect", Error(fmt::format("no host left to run it ({} was taken out: {})", node, reason),
                                   ErrorKind::unreachable));
      result.finish(utc_timestamp(std::chrono::system_clock::now()), 0.0);
      m_finished(result);
      it = m_queue.erase(it);
    }
  }

  const VariantContext& m_c;
  int m_total;
  const FinishedFn& m_finished;
  std::mutex m_mutex;
  std::condition_variable m_changed;
  std::deque<Item> m_queue;
  std::map<std::string, NodeState> m_nodes;
  std::vector<std::string> m_order;
  int m_running = 0;
  bool m_stopping = false;
  bool m_interrupted = false;
};

} // namespace

bool run_jobs(const VariantContext& context, std::vector<Job> jobs, int total, const FinishedFn& finished) {
  return Scheduler(context, std::move(jobs), total, finished).run();
}

} // namespace specctl::run::detail
