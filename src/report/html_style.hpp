#pragma once

// Private to src/report: report.html's stylesheet, inlined into its <style>.

namespace specctl::report::detail {

extern const char* const k_html_style;

} // namespace specctl::report::detail
