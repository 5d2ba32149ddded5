#include <specctl/server/accept_source.hpp>

#include "accept_source_parse.hpp"

#include <fmt/format.h>

namespace specctl::server {

const char* accept_source_name(AcceptSource::Kind kind) {
  switch (kind) {
  case AcceptSource::Kind::prometheus:
    return "prometheus";
  case AcceptSource::Kind::log:
    return "log";
  case AcceptSource::Kind::responses:
    return "responses";
  }
  return "log";
}

namespace detail {

std::vector<AcceptSource> parse_accept_sources(const util::YamlField& field,
                                               const std::vector<std::string>& metric_names) {
  std::vector<AcceptSource> out;
  if (!field.present() || !field.expect_list()) {
    return out;
  }
  const auto known_metric = [&](const util::YamlField& f, const std::string& name) {
    for (const auto& m : metric_names) {
      if (m == name) {
        return true;
      }
    }
    f.error(fmt::format("\"{}\" is not one of this template's log.metrics", name));
    return false;
  };
  for (const auto& item : field.items()) {
    if (!item.expect_map()) {
      continue;
    }
    item.check_keys({"prometheus", "log", "responses"});
    auto entries = item.entries();
    if (entries.size() != 1) {
      item.error("each source is one of prometheus, log or responses");
      continue;
    }
    AcceptSource source;
    const auto& key = entries.front().key;
    const util::YamlField& body = entries.front().value;
    if (key == "prometheus") {
      source.kind = AcceptSource::Kind::prometheus;
      if (!body.expect_map()) {
        continue;
      }
      body.check_keys({"path", "drafts", "accepted"});
      source.path = body["path"].present() ? body["path"].as_string().value_or("/metrics") : "/metrics";
      auto drafts = body["drafts"].as_string();
      auto accepted = body["accepted"].as_string();
      if (!drafts || !accepted) {
        body.error("prometheus needs the counters \"drafts\" and \"accepted\"");
        continue;
      }
      if (!source.path.starts_with('/')) {
        body["path"].error("a path starts with \"/\"");
        continue;
      }
      source.drafts = *drafts;
      source.accepted = *accepted;
    } else if (key == "log") {
      source.kind = AcceptSource::Kind::log;
      if (!body.expect_map()) {
        continue;
      }
      body.check_keys({"metric", "weight", "accepted"});
      source.metric = body["metric"].present() ? body["metric"].as_string().value_or("") : "accept_length";
      if (!known_metric(body["metric"], source.metric)) {
        continue;
      }
      if (body["weight"].present() && body["accepted"].present()) {
        body.error("a log source is weighted by \"weight\" or by the passes \"accepted\" implies, not both");
        continue;
      }
      if (body["weight"].present()) {
        source.weight = body["weight"].as_string().value_or("");
        if (!known_metric(body["weight"], source.weight)) {
          continue;
        }
      }
      if (body["accepted"].present()) {
        source.accepted = body["accepted"].as_string().value_or("");
        if (!known_metric(body["accepted"], source.accepted)) {
          continue;
        }
      }
    } else if (key == "responses") {
      source.kind = AcceptSource::Kind::responses;
    } else {
      continue;
    }
    out.push_back(std::move(source));
  }
  return out;
}

} // namespace detail

} // namespace specctl::server
