#include <specctl/report/variant_status.hpp>

#include <array>
#include <nlohmann/json.hpp>
#include <utility>

namespace specctl::report {

namespace {

constexpr std::array<std::pair<VariantStatus, std::string_view>, 5> k_names = {{
    {VariantStatus::ok, "ok"},
    {VariantStatus::failed, "failed"},
    {VariantStatus::interrupted, "interrupted"},
    {VariantStatus::not_run, "not run"},
    {VariantStatus::damaged, "damaged"},
}};

template <class Json> VariantStatus status_in(const Json& result) {
  auto it = result.is_object() ? result.find("status") : result.end();
  if (it == result.end() || !it->is_string()) {
    return VariantStatus::failed;
  }
  const auto& text = it->template get_ref<const std::string&>();
  // Only what result.json may say: "not run" and "damaged" are the report's words.
  for (auto status : {VariantStatus::ok, VariantStatus::failed, VariantStatus::interrupted}) {
    if (text == status_name(status)) {
      return status;
    }
  }
  return VariantStatus::failed;
}

} // namespace

std::string_view status_name(VariantStatus status) {
  for (const auto& [s, name] : k_names) {
    if (s == status) {
      return name;
    }
  }
  return "failed";
}

VariantStatus status_of(const nlohmann::json& result) {
  return status_in(result);
}

VariantStatus status_of(const nlohmann::ordered_json& result) {
  return status_in(result);
}

void to_json(nlohmann::json& j, VariantStatus status) {
  j = status_name(status);
}

void to_json(nlohmann::ordered_json& j, VariantStatus status) {
  j = status_name(status);
}

} // namespace specctl::report
