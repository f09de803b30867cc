//! The site's style and script, written into `assets/`: no CDN, no
//! library, nothing fetched at view time.

pub const CSS: &str = r#":root { --fg: #1d232a; --muted: #5b6570; --line: #d5dbe1; --bg: #fff;
  --pass: #17663a; --pass-bg: #dff3e6; --fail: #a1161b; --fail-bg: #fbe0e1;
  --inc: #7a5200; --inc-bg: #fdf0d2; --accent: #1f5fa8; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header { padding: .6rem 1.2rem; border-bottom: 1px solid var(--line); }
header .home { font-weight: 600; color: var(--fg); text-decoration: none; }
main { padding: 1rem 1.2rem 2rem; max-width: 1200px; }
footer { padding: .8rem 1.2rem; color: var(--muted); font-size: 13px; border-top: 1px solid var(--line); }
a { color: var(--accent); }
nav { margin-bottom: .8rem; }
div.table { overflow-x: auto; }
table { border-collapse: collapse; margin: .6rem 0 1rem; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid var(--line); padding: .3rem .55rem; text-align: left; vertical-align: top; }
th { background: #f3f5f7; }
table.sortable th { cursor: pointer; user-select: none; }
#experiments td { overflow-wrap: anywhere; }
@media (max-width: 900px) {
  main { padding: .8rem .6rem 1.5rem; }
  th, td { padding: .25rem .35rem; font-size: 13px; }
}
table.sortable th[aria-sort="ascending"]::after { content: " ▲"; }
table.sortable th[aria-sort="descending"]::after { content: " ▼"; }
.badge { display: inline-block; padding: 0 .45rem; border-radius: 3px; font-weight: 600; font-size: 13px; border: 1px solid currentColor; }
.badge.pass { color: var(--pass); background: var(--pass-bg); }
.badge.fail { color: var(--fail); background: var(--fail-bg); }
.badge.inconclusive { color: var(--inc); background: var(--inc-bg); }
.badge.neutral { color: var(--muted); background: #f3f5f7; }
strong.regressed { color: var(--fail); font-weight: 600; }
.filters { display: flex; flex-wrap: wrap; gap: .4rem 1.2rem; margin: .6rem 0; }
.filters label { display: flex; gap: .35rem; align-items: center; }
pre { background: #f6f8fa; padding: .7rem; overflow-x: auto; border: 1px solid var(--line); }
.report img { max-width: 100%; border: 1px solid var(--line); margin: .3rem 0; }
svg.chart { width: 100%; max-width: 860px; height: auto; border: 1px solid var(--line); }
svg.chart .axis { stroke: #333; }
svg.chart .grid { stroke: #e6e9ec; }
svg.chart .tick, svg.chart .label, svg.chart g text { font: 12px system-ui, sans-serif; fill: #333; }
svg.chart .series { fill: none; stroke: var(--accent); stroke-width: 1.5; }
svg.chart .point circle { fill: var(--accent); }
svg.chart .point:hover circle, svg.chart .point:focus circle { fill: #c2410c; }
svg.chart .bar { stroke: var(--accent); stroke-width: 1.5; }
svg.chart .host-change line { stroke: #777; stroke-dasharray: 4 4; }
svg.chart .step line { stroke-width: 2; }
svg.chart .step.improved line { stroke: var(--pass); }
svg.chart .step.regressed line { stroke: var(--fail); }
svg.chart .step.changed line { stroke: var(--inc); }
"#;

pub const JS: &str = r#"// lcx publish: filters and sorting of the index; nothing is fetched.
(function () {
  "use strict";
  var table = document.getElementById("experiments");
  if (!table) { return; }
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var shown = document.getElementById("shown");
  function value(id) { var e = document.getElementById(id); return e ? e.value : ""; }
  function filter() {
    var name = value("f-name").toLowerCase(), arm = value("f-arm"),
        host = value("f-host"), check = value("f-check"), n = 0;
    rows.forEach(function (r) {
      var ok = (!name || r.dataset.name.toLowerCase().indexOf(name) >= 0) &&
        (!arm || r.dataset.arms.split(" ").indexOf(arm) >= 0) &&
        (!host || r.dataset.host === host) &&
        (!check || r.dataset.check === check);
      r.hidden = !ok;
      if (ok) { n += 1; }
    });
    if (shown) { shown.textContent = n + " of " + rows.length + " experiments shown"; }
  }
  ["f-name", "f-arm", "f-host", "f-check"].forEach(function (id) {
    var e = document.getElementById(id);
    if (e) { e.addEventListener("input", filter); e.addEventListener("change", filter); }
  });
  var heads = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function (th, col) {
    th.tabIndex = 0;
    function sort() {
      var asc = th.getAttribute("aria-sort") !== "ascending";
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", asc ? "ascending" : "descending");
      var numeric = th.dataset.type === "number";
      rows.sort(function (a, b) {
        var x = a.cells[col].dataset.sort || a.cells[col].textContent,
            y = b.cells[col].dataset.sort || b.cells[col].textContent;
        var c = numeric ? Number(x) - Number(y) : x.localeCompare(y);
        return asc ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    }
    th.addEventListener("click", sort);
    th.addEventListener("keydown", function (e) { if (e.key === "Enter") { sort(); } });
  });
  filter();
}());
"#;
