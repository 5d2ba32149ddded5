// report.html's stylesheet: the page's colors, layout and print rules, kept apart
// from the layout of its sections (html.cpp).

#include "html_style.hpp"

namespace specctl::report::detail {

// Colors are custom properties so that the dark scheme and print only swap
// values. The series palette is Okabe-Ito (colorblind-safe), reordered so the
// first colors differ most, with yellow and black adjusted per background.
const char* const k_html_style = R"(:root {
  --bg: #ffffff; --fg: #1b1b1f; --muted: #5f6368; --border: #d0d4da; --stripe: #f4f6f8;
  --grid: #e3e6ea; --axis: #5f6368; --bad: #b3261e; --bad-bg: #fce8e6; --good: #1e7d32;
  --c0: #0072b2; --c1: #d55e00; --c2: #009e73; --c3: #cc79a7; --c4: #e69f00; --c5: #56b4e9;
  --c6: #3a3a3a; --c7: #a08c00;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #16181d; --fg: #e6e8eb; --muted: #a0a6ad; --border: #3b4049; --stripe: #1e2128;
    --grid: #2c3038; --axis: #a0a6ad; --bad: #ff8a80; --bad-bg: #3d1f1f; --good: #81c995;
    --c0: #56b4e9; --c1: #f08c4a; --c2: #2fc497; --c3: #e39ac3; --c4: #f0b429; --c5: #8fcdf2;
    --c6: #d9d9d9; --c7: #f0e442;
  }
}
:root { color-scheme: light dark; }
body { background: var(--bg); color: var(--fg); margin: 0;
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; }
main { max-width: 1100px; margin: 0 auto; padding: 1.5rem; }
h1 { margin: 0 0 .25rem; font-size: 1.6rem; }
h2 { margin: 2rem 0 .5rem; font-size: 1.25rem; border-bottom: 1px solid var(--border); }
h3 { margin: 1.25rem 0 .4rem; font-size: 1.05rem; }
.muted, .spec, figcaption, .nodata { color: var(--muted); }
dl.meta { display: grid; grid-template-columns: max-content auto; gap: .1rem 1rem; margin: .75rem 0; }
dl.meta dt { font-weight: 600; }
dl.meta dd { margin: 0; }
p.sources { color: var(--muted); font-size: .85em; margin: .25rem 0 1rem; }
dl.glossary dt { font-weight: 600; margin-top: .4rem; }
dl.glossary dd { margin: 0 0 0 1rem; }
.result-passed { color: var(--good); font-weight: 600; }
.result-failed { color: var(--bad); font-weight: 600; }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-variant-numeric: tabular-nums; }
@media screen { table { display: block; max-width: 100%; overflow-x: auto; } }
th, td { border: 1px solid var(--border); padding: .25rem .55rem; vertical-align: top; white-space: nowrap; }
td.reason { white-space: normal; min-width: 18rem; }
th { background: var(--stripe); text-align: left; }
td.num, th.num { text-align: right; white-space: nowrap; }
tr.speedup td { color: var(--muted); font-size: .9em; }
tr.speedup td.good { color: var(--good); }
tr.speedup td.bad { color: var(--bad); }
tr.failed td, tr.missed td { background: var(--bad-bg); }
.bad, .verdict-slower { color: var(--bad); font-weight: 600; }
.verdict-faster, .good { color: var(--good); font-weight: 600; }
details pre { max-height: 20rem; overflow: auto; margin: .3rem 0 0; padding: .4rem;
  background: var(--stripe); border: 1px solid var(--border); font-size: .8rem; white-space: pre-wrap; }
code { font-size: .9em; }
figure.plot { margin: 1rem 0 1.5rem; }
figure.plot svg { width: 100%; max-width: 720px; height: auto; display: block; }
figcaption { font-size: .9rem; margin-top: .25rem; }
svg.chart text { fill: var(--fg); font-size: 12px; }
svg.chart text.tick, svg.chart text.note { fill: var(--muted); }
svg.chart .grid { stroke: var(--grid); stroke-width: 1; }
svg.chart .axis, svg.chart .tickmark { stroke: var(--axis); stroke-width: 1; }
svg.chart .empty { fill: none; stroke: var(--bad); stroke-dasharray: 4 3; }
svg.chart .note { fill: var(--bad); }
.series .line { fill: none; stroke: var(--c); stroke-width: 2; }
.series .line.dashed { stroke-dasharray: 7 4; }
.series .marker, .series .bar { fill: var(--c); stroke: var(--c); }
.series .marker.hollow { fill: var(--bg); stroke-width: 2; }
.series .bar { fill-opacity: .85; }
.series .err { stroke: var(--fg); stroke-width: 1.5; fill: none; }
.legend.neutral .line { stroke: var(--fg); }
.s0 { --c: var(--c0); } .s1 { --c: var(--c1); } .s2 { --c: var(--c2); } .s3 { --c: var(--c3); }
.s4 { --c: var(--c4); } .s5 { --c: var(--c5); } .s6 { --c: var(--c6); } .s7 { --c: var(--c7); }
@page { margin: 1.5cm; }
@media print {
  :root {
    --bg: #ffffff; --fg: #000000; --muted: #444444; --border: #999999; --stripe: #eeeeee;
    --grid: #dddddd; --axis: #444444; --bad: #b3261e; --bad-bg: #fce8e6; --good: #1e7d32;
    --c0: #0072b2; --c1: #d55e00; --c2: #009e73; --c3: #cc79a7; --c4: #e69f00; --c5: #56b4e9;
    --c6: #3a3a3a; --c7: #a08c00;
  }
  main { max-width: none; padding: 0; }
  figure.plot, table, dl.meta { break-inside: avoid; }
  h2, h3 { break-after: avoid; }
  details pre { max-height: none; }
  th, td { white-space: normal; }
}
)";

} // namespace specctl::report::detail
