/* spark-watchd status page, pair view: this Spark and its [fleet] peers side by side (GET /api/v1/fleet).
 * Hidden unless [fleet] peers are configured. Findings, temperature, clock, memory budget and tokens/s of
 * every Spark on one time axis (this daemon's sample clock); a peer that is down is shown down. */
"use strict";
(function () {
  const REFRESH_MS = Math.max(500, 1000 * (parseFloat(document.body.dataset.refreshS) || 10));
  const GIB = 1024 * 1024 * 1024;
  const $ = (id) => document.getElementById(id);
  // app.js's element builder and number format (scripts run in order: app.js first); whole units by default.
  const h = window.SparkPage.h;
  const num = (v, d) => window.SparkPage.num(v, d === undefined ? 0 : d);

  function renderTable(view) {
    const tbody = $("fleet-members");
    tbody.replaceChildren();
    for (const m of view.members || []) {
      const tr = h("tr", m.up ? "sev-" + (m.worst || "unknown") : "fleet-down");
      tr.dataset.member = m.name;
      tr.appendChild(h("th", null, m.name + (m.self ? " (this Spark)" : ""))).setAttribute("scope", "row");
      if (!m.up) {
        // Why it is down in its State cell ("down: Connection refused"), never under Link (a cable fault).
        tr.appendChild(h("td", "state error", "down: " + (m.error || "no answer")));
        for (let i = 0; i < 6; i++) tr.appendChild(h("td", i < 5 && i > 0 ? "num" : null, "–"));
        label(tr);
        tbody.appendChild(tr);
        continue;
      }
      const f = m.findings || {};
      const worst = ["G3", "G4", "G6"].filter((g) => f[g] && f[g].severity !== "ok").map((g) => g + " " + f[g].severity);
      tr.appendChild(h("td", "state", m.fresh === false ? "stale" : "up"));
      tr.appendChild(h("td", "findings", worst.length ? worst.join(", ") : "all ok"));
      tr.appendChild(h("td", "num", num(m.temp_c) + " °C"));
      tr.appendChild(h("td", "num", num(m.sm_clock_mhz) + " MHz"));
      tr.appendChild(h("td", "num", m.budget_bytes === null || m.budget_bytes === undefined ? "–" : num(m.budget_bytes / GIB, 1) + " GiB"));
      tr.appendChild(h("td", "num", num(m.tokens_per_second)));
      tr.appendChild(h("td", "link", m.link && m.link.problem ? m.link.summary : "–"));
      label(tr);
      tbody.appendChild(tr);
    }
    const v = $("fleet-verdict");
    v.textContent = view.summary || "";
    v.className = "fleet-verdict" + (view.straggler ? " sev-warning" : view.pending ? " pending" : "");
  }

  /* Each cell carries its column's name, so a phone shows a row as a small card ("Temperature 81 °C"). */
  function label(tr) {
    const heads = Array.from(document.querySelectorAll("table.fleet thead th")).map((th) => th.textContent);
    Array.from(tr.children).forEach((c, i) => { if (heads[i]) c.dataset.label = heads[i]; });
  }

  function renderCharts(history, intervalS) {
    if (!window.SparkChart) return;
    const names = Object.keys(history);
    let t0 = Infinity, t1 = -Infinity;
    for (const n of names) for (const p of history[n]) { if (p.t < t0) t0 = p.t; if (p.t > t1) t1 = p.t; }
    if (!isFinite(t0)) return;
    if (t1 - t0 < 60) t0 = t1 - 60;
    // One series per Spark, its legend value rounded to the unit it is drawn in.
    const series = (key, fmt, scale) => names.map((n, i) => ({
      label: n, k: i % 7, fmt: fmt, points: history[n].map((p) => [p.t, p.up && p[key] !== null && p[key] !== undefined ? p[key] * (scale || 1) : null]),
    }));
    // Points are one peer read apart (interval_s live; a replay's sample clock runs faster): a line breaks
    // only where more than two reads in a row are missing, judged on the points' own median spacing.
    const steps = [];
    for (const n of names) for (let i = 1; i < history[n].length; i++) steps.push(history[n][i].t - history[n][i - 1].t);
    steps.sort((a, b) => a - b);
    const every = steps.length ? steps[steps.length >> 1] : intervalS > 0 ? intervalS : 30;
    const base = { t0: t0, t1: t1, gap: Math.max(2.5 * every, (t1 - t0) / 20) };
    const C = (v) => num(v) + " °C", MHZ = (v) => num(v) + " MHz", G = (v) => num(v, 1) + " GiB", TPS = (v) => num(v) + "/s";
    SparkChart.draw($("fleet-temp"), Object.assign({}, base, { left: { fmt: C }, series: series("temp_c", C) }));
    SparkChart.draw($("fleet-clock"), Object.assign({}, base, { left: { fmt: (v) => num(v) }, series: series("sm_clock_mhz", MHZ) }));
    SparkChart.draw($("fleet-budget"), Object.assign({}, base, { left: { fmt: (v) => num(v, 1), zero: true }, series: series("budget_bytes", G, 1 / GIB) }));
    SparkChart.draw($("fleet-tokens"), Object.assign({}, base, { left: { fmt: (v) => num(v), zero: true }, series: series("tokens_per_second", TPS) }));
  }

  async function linkLine() {
    /* The ConnectX-7 verdict of this Spark (the `link` extra), shown whenever the host has an RDMA NIC. */
    const r = await fetch("/api/v1/status", { cache: "no-store", credentials: "same-origin" });
    if (!r.ok) return;
    const ex = ((await r.json()) || {}).extras || {};
    const p = $("link-line");
    p.hidden = !(ex.link && ex.link.summary);
    if (!p.hidden) {
      p.textContent = "ConnectX-7 " + ex.link.summary;
      p.className = "link-line" + (ex.link.problem ? " sev-warning" : "");
    }
    platformLine(ex.platform);
  }

  function platformLine(pl) {
    /* The boot's stack (the `platform` extra), what changed since the last boot, any known-bad combination. */
    const p = $("platform-line");
    p.hidden = !(pl && pl.summary);
    if (p.hidden) return;
    const parts = ["Platform: " + pl.summary];
    if (pl.change && pl.change.summary) parts.push("changed since the last boot: " + pl.change.summary);
    for (const x of pl.problems || []) parts.push("known bad: " + x.summary + ". " + x.advice);
    p.textContent = parts.join(". ");
    p.className = "link-line" + ((pl.problems || []).length ? " sev-warning" : "");
  }

  async function tick() {
    try {
      await linkLine();
      const r = await fetch("/api/v1/fleet", { cache: "no-store", credentials: "same-origin" });
      if (!r.ok) return;
      const doc = await r.json();
      const section = $("fleet");
      section.hidden = !doc.configured;
      if (!doc.configured || !doc.view) return;
      renderTable(doc.view);
      renderCharts(doc.history || {}, doc.view.interval_s);
    } catch (e) {
      /* the main view reports the daemon unreachable */
    }
  }
  function loop() { tick().finally(() => setTimeout(loop, REFRESH_MS)); }
  loop();
})();
