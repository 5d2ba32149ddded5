#include <specctl/util/json_box.hpp>

#include <nlohmann/json.hpp>

namespace specctl::util {

JsonBox::JsonBox() : m_value(std::make_unique<nlohmann::json>()) {}

JsonBox::JsonBox(nlohmann::json value) : m_value(std::make_unique<nlohmann::json>(std::move(value))) {}

JsonBox::JsonBox(const JsonBox& other) : m_value(std::make_unique<nlohmann::json>(*other.m_value)) {}

JsonBox::JsonBox(JsonBox&& other) noexcept = default;

JsonBox& JsonBox::operator=(const JsonBox& other) {
  if (this != &other) {
    m_value = std::make_unique<nlohmann::json>(*other.m_value);
  }
  return *this;
}

JsonBox& JsonBox::operator=(JsonBox&& other) noexcept = default;

JsonBox::~JsonBox() = default;

} // namespace specctl::util
