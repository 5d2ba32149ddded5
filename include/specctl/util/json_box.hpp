#pragma once

#include <nlohmann/json_fwd.hpp>

#include <memory>

namespace specctl::util {

// A JSON value carried by a header that neither reads nor builds it (a knob's value in
// ServerConfig, a matrix point in Variant). The header takes json_fwd.hpp; only the
// sources that look inside include json.hpp. A copy copies the value; a box moved from
// may only be assigned to or destroyed.
class JsonBox {
public:
  JsonBox();
  // Implicit: a knob or a matrix point is set from a value as written.
  JsonBox(nlohmann::json value);
  JsonBox(const JsonBox& other);
  JsonBox(JsonBox&& other) noexcept;
  JsonBox& operator=(const JsonBox& other);
  JsonBox& operator=(JsonBox&& other) noexcept;
  ~JsonBox();

  const nlohmann::json& operator*() const { return *m_value; }
  const nlohmann::json* operator->() const { return m_value.get(); }

private:
  std::unique_ptr<nlohmann::json> m_value;
};

} // namespace specctl::util
