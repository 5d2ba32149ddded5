#pragma once

#include <memory>

namespace specctl::util {

// The deleter of UniqueHandle: calls the C library's release function and
// ignores what it returns (curl_multi_cleanup and libssh2_session_free answer
// with a code nobody can act on in a destructor).
template <auto Free> struct FreeWith {
  template <typename T> void operator()(T* handle) const { static_cast<void>(Free(handle)); }
};

// Owns one C object that `Free` releases, as in
// `UniqueHandle<CURL, curl_easy_cleanup>`: move-only, freed once on
// destruction or reset, never freed when null. Objects that need more than one
// call to release get a small function of their own as `Free`.
template <typename T, auto Free> using UniqueHandle = std::unique_ptr<T, FreeWith<Free>>;

} // namespace specctl::util
