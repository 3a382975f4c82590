/* spark-watchd status page: polls the daemon (same origin only) and renders findings, charts, events. */
"use strict";
(function () {
  const body = document.body;
  const REFRESH_MS = Math.max(500, 1000 * (parseFloat(body.dataset.refreshS) || 10));
  const GIB = 1024 * 1024 * 1024;
  const MAX_RECORDS = 50000;
  const TITLES = { G3: "Unified-memory pressure", G4: "Thermal throttling", G6: "Workload contention" };
  const EVENT_CLASS = { eviction: "bad", oom_kill: "bad", reboot: "bad", throttle_start: "warn", throttle_end: "good", xid: "warn", driver_oom: "bad", pcie_fatal: "bad", workload_exit: "warn" };
  const EVENT_LABEL = { eviction: "eviction", oom_kill: "OOM kill", reboot: "reboot", throttle_start: "throttle start", throttle_end: "throttle end", xid: "Xid", driver_oom: "driver out of memory", pcie_fatal: "PCIe fatal error", workload_exit: "workload gone" };

  const state = { records: [], generation: null, lastTs: null, status: null, workloads: null, hours: parseFloat(body.dataset.pageHours) || 12 };
  try { const h = parseFloat(localStorage.getItem("sparkwatchd.hours")); if (h > 0) state.hours = h; } catch (e) { /* storage off */ }

  const $ = (id) => document.getElementById(id);
  function h(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }

  function num(v, digits) {
    if (v === null || v === undefined || !isFinite(v)) return "–";
    const a = Math.abs(v);
    const d = digits !== undefined ? digits : a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3;
    if (Math.round(a * 10 ** d) === 0) v = 0; // a tiny fall rounds to "0", never "-0"
    return Number(v).toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: 0 });
  }
  const gib = (b) => (b === null || b === undefined ? "–" : num(b / GIB, 1) + " GiB");
  // The pair view (fleet.js, loaded after this file) builds its cells with the same two helpers.
  window.SparkPage = Object.freeze({ h: h, num: num });
  function stamp(t, raw) {
    if (!t) return "–";
    const d = new Date((t + (raw ? 0 : state.shift || 0)) * 1000);
    const p = (n) => (n < 10 ? "0" : "") + n;
    return d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) + " " + p(d.getHours()) + ":" + p(d.getMinutes()) + ":" + p(d.getSeconds());
  }

  /* ---- data ---------------------------------------------------------------------------------- */

  async function getJSON(path) {
    const r = await fetch(path, { cache: "no-store", credentials: "same-origin" });
    if (!r.ok) throw new Error(path + ": HTTP " + r.status);
    return r.json();
  }

  async function pollHistory() {
    const q = state.lastTs === null ? "" : "?since=" + encodeURIComponent(state.lastTs);
    let hist = await getJSON("/api/v1/history" + q);
    if (state.generation !== null && hist.generation !== state.generation) {
      // The daemon cleared its history (a looping replay restarted): start over.
      state.records = [];
      state.lastTs = null;
      hist = await getJSON("/api/v1/history");
    }
    state.generation = hist.generation;
    if (hist.records.length) {
      state.records = state.records.concat(hist.records);
      if (state.records.length > MAX_RECORDS) state.records = state.records.slice(-MAX_RECORDS);
      state.lastTs = state.records[state.records.length - 1].ts;
    }
  }

  async function tick() {
    const results = await Promise.allSettled([getJSON("/api/v1/status"), pollHistory(), getJSON("/api/v1/workloads")]);
    const errors = results.filter((r) => r.status === "rejected").map((r) => String(r.reason && r.reason.message || r.reason));
    if (results[0].status === "fulfilled") state.status = normaliseStatus(results[0].value);
    if (results[2].status === "fulfilled") state.workloads = results[2].value;
    const banner = $("banner");
    const st = state.status;
    if (errors.length) {
      banner.textContent = "Cannot reach the daemon (" + errors[0] + "); showing the last data received. Retrying every " + REFRESH_MS / 1000 + " s.";
      banner.hidden = false;
    } else if (st && !st.fresh && st.mode === "live" && st.ts) {
      banner.textContent = "The last sample is " + (st.age !== null ? num(st.age, 0) + " s" : "too") + " old: the daemon is not sampling. Check its log (journalctl -u spark-watchd).";
      banner.hidden = false;
    } else {
      banner.hidden = true;
    }
    render();
  }

  function loop() {
    tick().catch(() => { /* rendered as a banner */ }).finally(() => setTimeout(loop, REFRESH_MS));
  }

  /* /api/v1/status belongs to the daemon; accept the reasonable shapes so a field rename never blanks the page. */
  function normaliseStatus(s) {
    const out = { findings: {}, events: [], sources: [], mode: "live", host: null, ts: null, published: null };
    let f = s.findings || (s.diagnosis && s.diagnosis.findings) || {};
    if (Array.isArray(f)) { const m = {}; for (const x of f) m[x.gotcha] = x; f = m; }
    out.findings = f;
    out.events = s.recent_events || s.events || (s.diagnosis && s.diagnosis.events) || [];
    let src = s.sources || {};
    if (!Array.isArray(src)) src = Object.keys(src).map((k) => Object.assign({ name: k }, typeof src[k] === "object" ? src[k] : { up: !!src[k] }));
    out.sources = src;
    out.mode = String(s.mode || "live").toLowerCase();
    out.demo = (s.extras && s.extras.demo) || s.demo || null;
    out.postmortem = (s.extras && s.extras.postmortem) || null;
    if (out.demo) out.mode = "demo";
    const sample = s.sample || {};
    out.host = s.host || sample.host || null;
    out.ts = s.ts || s.sample_ts || s.last_sample_ts || sample.ts || null;
    out.published = s.published_at || null;
    out.fresh = s.fresh !== false;
    out.age = typeof s.age_seconds === "number" ? s.age_seconds : null;
    out.replay = s.replay && typeof s.replay.shift_s === "number" ? s.replay : null;
    out.gpus = Array.isArray(s.gpus) ? s.gpus : null;
    out.serving = Array.isArray(s.serving) ? s.serving : [];
    out.extras = s.extras && typeof s.extras === "object" ? s.extras : {};
    out.driverFeeds = s.driver_feeds && typeof s.driver_feeds === "object" ? s.driver_feeds : {};
    return out;
  }

  /* ---- rendering ----------------------------------------------------------------------------- */

  function render() {
    const st = state.status;
    state.shift = st && st.replay ? st.replay.shift_s : 0;
    SparkChart.setTimeShift(state.shift);
    if (st) {
      renderHeader(st);
      renderFindings(st.findings);
      renderSources(st.sources, st.driverFeeds);
      const cost = st.extras.daemon_cost;
      $("daemon-cost").textContent = cost && cost.summary ? String(cost.summary) : "";
    }
    renderCharts();
    renderEvents();
    renderServing();
    renderEnergy();
    renderWorkloads();
    for (const t of document.querySelectorAll("table.workloads")) labelCells(t);
  }

  /* Each cell carries its column's name, so a narrow screen can show rows as cards ("Kind vllm"). */
  function labelCells(table) {
    const heads = Array.from(table.querySelectorAll("thead th")).map((th) => th.textContent);
    for (const tr of table.querySelectorAll("tbody tr")) {
      Array.from(tr.children).forEach((c, i) => { if (heads[i] && c.colSpan === 1) c.dataset.label = heads[i]; });
    }
  }

  function renderHeader(st) {
    $("host").textContent = st.host ? "· " + st.host : "";
    const mode = $("mode");
    if (st.mode === "replay" || st.mode === "demo") {
      mode.hidden = false;
      mode.textContent = st.mode.toUpperCase();
      mode.title = st.demo
        ? "Demo: the bundled " + st.demo + " scenario, replayed (no Spark needed)."
        : "Replaying a recorded trace.";
    } else {
      mode.hidden = true;
    }
    const ts = st.ts || state.lastTs;
    let text = ts ? "Last sample " + stamp(ts) : "No sample yet";
    if (st.replay && st.replay.recorded_ts) {
      // Times are shown as if the newest sample were now; say what was really replayed, and when it was recorded.
      const what = st.replay.trace ? st.replay.trace + " " : "";
      text += " · replay of " + what + "recorded " + stamp(st.replay.recorded_ts, true) +
        (st.replay.speed && st.replay.speed !== 1 ? " at " + num(st.replay.speed) + "×" : "") + ", times shifted to now";
    }
    if (st.published && st.mode === "live") {
      const age = Math.max(0, Date.now() / 1000 - st.published);
      text += " (" + num(age, 0) + " s ago)";
    }
    $("freshness").textContent = text + " · refreshes every " + num(REFRESH_MS / 1000) + " s";
  }

  function renderFindings(findings) {
    const root = $("findings");
    const order = ["G3", "G4", "G6"].concat(Object.keys(findings).filter((g) => !["G3", "G4", "G6"].includes(g)).sort());
    root.textContent = "";
    for (const g of order) {
      const f = findings[g] || { severity: "unknown", summary: "Not judged yet." };
      const sev = String(f.severity || "unknown");
      const art = h("article", "finding sev-" + sev);
      art.dataset.gotcha = g;
      art.dataset.severity = sev;
      art.setAttribute("aria-labelledby", "f-" + g);
      const head = h("header");
      const title = h("h3", null, g + " " + (TITLES[g] || ""));
      title.id = "f-" + g;
      head.appendChild(title);
      const badge = h("span", "sev", sev);
      badge.setAttribute("aria-label", "severity " + sev);
      head.appendChild(badge);
      art.appendChild(head);
      art.appendChild(h("p", "summary", f.summary || ""));
      if (f.anomaly) {
        const what = { power_delivery: "a power-delivery fault (needs a full AC power cycle)", recurring_stall: "a recurring low-power stall that clears on its own (not a power-cycle fault)", hung_engine: "a hung GPU engine", power_limit: "the board firmware's power limit (pl1/syspl1) is holding the clocks" }[f.anomaly] || f.anomaly;
        art.appendChild(h("p", "anomaly", "Not thermal: " + what + "."));
      }
      const ev = f.evidence || {};
      // An empty list (no heavy workloads) is no evidence: no empty row.
      // An empty list (no heavy workloads) or a figure not known at this sample is no evidence: no "–" row.
      const keys = Object.keys(ev).filter((k) => ev[k] !== null && ev[k] !== undefined && !(Array.isArray(ev[k]) && ev[k].length === 0));
      if (keys.length) {
        const dl = h("dl", "evidence");
        for (const k of keys) {
          dl.appendChild(h("dt", null, evidenceLabel(k)));
          dl.appendChild(h("dd", null, evidenceValue(k, ev[k])));
        }
        art.appendChild(dl);
      }
      const advice = Array.isArray(f.advice) ? f.advice : f.advice ? [f.advice] : [];
      if (advice.length) {
        art.appendChild(h("p", "advice-title", "What to do"));
        const ul = h("ul", "advice");
        for (const a of advice) ul.appendChild(h("li", null, a));
        art.appendChild(ul);
      }
      renderAck(art, g, sev, f.acknowledged);
      root.appendChild(art);
    }
  }

  /* An acknowledged finding keeps its colour and says so; a warning or critical one offers to be acknowledged. */
  function renderAck(art, g, sev, ack) {
    if (ack && typeof ack === "object") {
      art.classList.add("acked");
      const p = h("p", "ack-note", "Acknowledged until " + stamp(ack.until, true) + (ack.note ? ": " + ack.note : ""));
      const undo = h("button", "ack-withdraw", "Withdraw");
      undo.type = "button";
      undo.addEventListener("click", () => ackRequest(art, "DELETE", "/api/v1/acks?gotcha=" + encodeURIComponent(g)));
      p.appendChild(undo);
      art.appendChild(p);
    } else if (sev === "warning" || sev === "critical") {
      const b = h("button", "ack-add", "Acknowledge…");
      b.type = "button";
      b.title = "Accept this finding for a while: shown as acknowledged, no longer failing status or alerts; a worse or new episode counts again";
      b.addEventListener("click", () => {
        const hours = window.prompt("Acknowledge " + g + " for how many hours?", "8");
        if (hours === null) return;
        const note = window.prompt("Why? (shown beside the finding)", "");
        ackRequest(art, "POST", "/api/v1/acks", { gotcha: g, for_s: Number(hours) * 3600, note: note || "" });
      });
      art.appendChild(b);
    }
  }

  async function ackRequest(art, method, path, body) {
    const init = { method, credentials: "same-origin", headers: {} };
    if (body) { init.headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
    let why = null;
    try {
      const r = await fetch(path, init);
      if (!r.ok) why = ((await r.json().catch(() => ({}))).error) || "HTTP " + r.status;
    } catch (e) { why = String(e); }
    if (why) { art.appendChild(h("p", "ack-error", "Not acknowledged: " + why)); return; }
    tick().catch(() => {});
  }

  /* Evidence keys carry their unit as a suffix (memory_bytes, psi_some_avg60_pct...): show it on the value.
     The same rules as the terminal's (commands/term.py evidence_text); tests check both on every key. */
  const UNITS = [
    [/_bytes_per_s$/, (v) => gib(v) + "/s"], [/_gib_per_h$/, (v) => num(v) + " GiB/h"],
    [/_bytes$/, (v) => gib(v)], [/_kb$/, (v) => gib(v * 1024)], [/_pct$/, (v) => num(v) + " %"],
    [/_share$/, (v) => num(v * 100) + " %"], [/_ratio$/, (v) => "×" + num(v)],
    [/_per_s$/, (v) => num(v) + "/s"], [/_w$/, (v) => num(v) + " W"], [/_c$/, (v) => num(v) + " °C"],
    [/_mhz$/, (v) => num(v, 0) + " MHz"], [/_(s|seconds)$/, (v) => num(v) + " s"], [/_ts$/, (v) => stamp(v)],
    [/_seconds_total$/, (v) => num(v) + " s"], [/^step_seconds_/, (v) => num(v) + " s"],
    [/_?bytes_per_second$/, (v) => (Math.abs(v) >= GIB ? num(v / GIB, 1) + " GiB/s" : num(v / 1048576, 1) + " MiB/s")], [/_?gib_per_hour$/, (v) => num(v) + " GiB/h"],
  ];
  /* Process ids are names, not quantities: never "5,120". */
  const IDS = /^(pid|pids|members|gpu|index|xid)$/;
  function evidenceLabel(k) {
    if (/^step_seconds_/.test(k)) return "step time " + k.slice(13);
    const u = /_(share|ratio)$/.test(k) ? null : UNITS.find((x) => x[0].test(k));
    return (u ? k.replace(u[0], "") : k).replace(/_/g, " ") || "rate";
  }
  function evidenceValue(k, v) {
    if (v === null || v === undefined) return "–";
    if (typeof v === "number") {
      if (IDS.test(k)) return String(v);
      const u = UNITS.find((x) => x[0].test(k));
      return u ? u[1](v) : num(v);
    }
    if (typeof v === "boolean") return v ? "yes" : "no";
    if (Array.isArray(v)) return v.map((x) => evidenceValue(k, x)).join(IDS.test(k) ? ", " : "\n");
    if (typeof v === "object") {
      return Object.keys(v).filter((x) => v[x] !== null && v[x] !== undefined)
        .map((x) => evidenceLabel(x) + " " + evidenceValue(x, v[x])).join(", ");
    }
    return String(v);
  }

  /* The driver-events feeds (kernel log, previous boot, NVML events): what each is doing, lines rejected. */
  const FEED_OK = { watching: true, read: true, off: true, "not supported": true };

  function renderSources(sources, feeds) {
    const ul = $("sources");
    ul.textContent = "";
    if (!sources.length) { ul.appendChild(h("li", "up", "no source status yet")); return; }
    for (const s of sources.slice().sort((a, b) => String(a.name).localeCompare(String(b.name)))) {
      const up = s.up !== false;
      const li = h("li", up ? "up" : "down", s.name + (up ? " up" : " down" + (s.error ? ": " + s.error : "")));
      li.dataset.source = s.name;
      ul.appendChild(li);
      if (s.name !== "driver_events") continue;
      for (const name of Object.keys(feeds || {}).sort()) {
        const f = feeds[name] || {};
        const n = Number(f.lines_rejected) || 0;
        const text = "\u2514 " + name + ": " + String(f.state || "off") + (f.detail ? " (" + f.detail + ")" : "") +
          (n ? ", " + n + " line" + (n === 1 ? "" : "s") + " rejected" : "");
        const fi = h("li", FEED_OK[f.state] ? "up" : "down", text);
        fi.dataset.feed = name;
        ul.appendChild(fi);
      }
    }
  }

  function seriesOf(key, scale) {
    return state.records.map((r) => {
      const v = r[key];
      if (v === null || v === undefined) return [r.ts, null];
      return [r.ts, v * (scale || 1)];
    });
  }

  function throttleBands() {
    const bands = [];
    let start = null, prev = null;
    for (const r of state.records) {
      if (r.throttle) { if (start === null) start = prev !== null ? (prev + r.ts) / 2 : r.ts; }
      else if (start !== null) { bands.push([start, (prev + r.ts) / 2]); start = null; }
      prev = r.ts;
    }
    if (start !== null) bands.push([start, prev]);
    return bands;
  }

  function renderCharts() {
    for (const b of document.querySelectorAll(".range button")) b.setAttribute("aria-pressed", String(parseFloat(b.dataset.hours) === state.hours));
    const recs = state.records;
    const t1 = recs.length ? recs[recs.length - 1].ts : Date.now() / 1000;
    const t0 = recs.length ? Math.max(t1 - state.hours * 3600, Math.min(recs[0].ts, t1 - 60)) : t1 - 3600;
    const steps = [];
    for (let i = Math.max(1, recs.length - 50); i < recs.length; i++) steps.push(recs[i].ts - recs[i - 1].ts);
    steps.sort((a, b) => a - b);
    const gap = Math.max(5, 5 * (steps.length ? steps[steps.length >> 1] : 30));
    const bands = throttleBands();
    const base = { t0: t0, t1: t1, gap: gap };
    const W = (v) => num(v, 0) + " W", C = (v) => num(v, 1) + " °C", MHZ = (v) => num(v, 0) + " MHz";
    const G = (v) => num(v, 1) + " GiB", PCT = (v) => num(v, 2) + " %", RATE = (v) => num(v) + "/s";

    // Without a GPU the GPU charts would say "No data yet" forever: say why instead.
    const gpuEmpty = noGpuReason(state.status);
    // Power and temperature have their own charts and axes: two units on one plot read as one scale.
    SparkChart.draw($("chart-power"), Object.assign({}, base, {
      bands: bands, empty: gpuEmpty,
      left: { fmt: (v) => num(v, 0) + " W", zero: true },
      series: [{ label: "Power", k: 0, points: seriesOf("power_w"), fmt: W }],
    }));
    SparkChart.draw($("chart-temp"), Object.assign({}, base, {
      bands: bands, empty: gpuEmpty,
      left: { fmt: (v) => num(v, 0) + " °C" },
      series: [
        { label: "Temperature", k: 1, points: seriesOf("temp_c"), fmt: C },
        { label: "Slowdown threshold", k: 6, dash: true, points: seriesOf("slowdown_temp_c"), fmt: C },
      ],
    }));
    SparkChart.draw($("chart-clock"), Object.assign({}, base, {
      bands: bands, empty: gpuEmpty, left: { fmt: (v) => num(v, 0) },
      series: [
        { label: "SM clock", k: 0, points: seriesOf("sm_clock_mhz"), fmt: MHZ },
        { label: "Applications clock", k: 6, dash: true, points: seriesOf("app_clock_mhz"), fmt: MHZ },
      ],
    }));
    // Five series in five distinct hues; the pool's total is the axis top, the window minimum is in the G3 card.
    const totals = seriesOf("mem_total_bytes", 1 / GIB).filter((p) => p[1] !== null);
    SparkChart.draw($("chart-memory"), Object.assign({}, base, {
      left: { fmt: (v) => num(v, 0), zero: true, max: totals.length ? totals[totals.length - 1][1] : undefined },
      series: [
        { label: "Available", k: 0, points: seriesOf("mem_available_bytes", 1 / GIB), fmt: G },
        // The budget as G3 judged it: below the zero line once MemAvailable is into the OS reserve.
        { label: "Budget", k: 3, dash: true, points: seriesOf("mem_budget_bytes", 1 / GIB), fmt: G },
        { label: "Page cache", k: 4, points: seriesOf("mem_cached_bytes", 1 / GIB), fmt: G },
        { label: "Anon", k: 2, points: seriesOf("mem_anon_bytes", 1 / GIB), fmt: G },
        { label: "GPU-attributed", k: 1, points: seriesOf("mem_gpu_attributed_bytes", 1 / GIB), fmt: G },
      ],
    }));
    SparkChart.draw($("chart-psi"), Object.assign({}, base, {
      left: { fmt: (v) => num(v) + "%", zero: true, max: 1 },
      series: [
        { label: "some", k: 4, points: seriesOf("psi_some_avg60"), fmt: PCT },
        { label: "full", k: 1, points: seriesOf("psi_full_avg60"), fmt: PCT },
      ],
    }));
    SparkChart.draw($("chart-paging"), Object.assign({}, base, {
      left: { fmt: (v) => num(v), zero: true }, right: { fmt: (v) => num(v), zero: true },
      series: [
        { label: "Swap-out pages", k: 2, points: seriesOf("swap_out_pages_per_s"), fmt: RATE },
        { label: "Major faults (right)", k: 1, axis: "r", points: seriesOf("major_faults_per_s"), fmt: RATE },
      ],
    }));
    // The three jobs seen last (a running one is never crowded out by old ones); a job missing from the
    // newest sample has ended: its line stays, its legend says so instead of repeating its last values.
    const lastSeen = new Map();
    for (const r of recs) for (const j of r.jobs || []) lastSeen.set(j.job, r.ts);
    const jobs = Array.from(lastSeen.keys()).sort((a, b) => lastSeen.get(b) - lastSeen.get(a)).slice(0, 3);
    const running = new Set(((recs.length && recs[recs.length - 1].jobs) || []).map((j) => j.job));
    const training = [];
    jobs.forEach((job, i) => {
      const pick = (field) => recs.map((r) => { const j = (r.jobs || []).find((x) => x.job === job); return [r.ts, j ? j[field] : null]; });
      const name = lastSeen.size > 1 ? job + " " : "";
      const ended = !running.has(job);
      const tag = ended ? " (ended)" : "";
      training.push({ label: name + "step time" + tag, k: i * 2, ended: ended, points: pick("step_seconds"), fmt: (v) => num(v) + " s" });
      training.push({ label: name + "tokens/s (right)" + tag, k: i * 2 + 1, axis: "r", dash: true, ended: ended, points: pick("tokens_per_second"), fmt: (v) => num(v, 0) });
    });
    SparkChart.draw($("chart-training"), Object.assign({}, base, {
      bands: bands, left: { fmt: (v) => num(v) + " s", zero: true }, right: { fmt: (v) => num(v / 1000, 1) + "k", zero: true },
      series: training, empty: "No training job has reported progress (POST /api/v1/progress)",
    }));
    // Serving: per server, on the same time axis (and throttle bands) as temperature, clocks and findings.
    const servers = [];
    for (const r of recs) for (const x of r.serving || []) if (!servers.includes(x.server)) servers.push(x.server);
    const pickS = (server, field, scale) => recs.map((r) => {
      const x = (r.serving || []).find((y) => y.server === server);
      return [r.ts, x && x[field] !== null && x[field] !== undefined ? x[field] * (scale || 1) : null];
    });
    const serving = [], latency = [];
    servers.slice(0, 4).forEach((server, i) => {
      serving.push({ label: server + " tokens/s", k: i * 2, points: pickS(server, "generation_tokens_per_s"), fmt: (v) => num(v, 0) + "/s" });
      serving.push({ label: server + " queued (right)", k: i * 2 + 1, axis: "r", dash: true, points: pickS(server, "requests_waiting"), fmt: (v) => num(v, 0) });
      latency.push({ label: server + " TTFT p95", k: i * 2, points: pickS(server, "ttft_p95_s"), fmt: (v) => num(v, 2) + " s" });
      latency.push({ label: server + " KV use (right)", k: i * 2 + 1, axis: "r", dash: true, points: pickS(server, "kv_usage", 100), fmt: (v) => num(v, 0) + " %" });
    });
    // A found server that exports none of a chart's figures is named with what it lacks, never "no server".
    const listed = servers.length ? servers : ((state.status && state.status.serving) || []).map((x) => x.server);
    const lacking = (what) => listed.length
      ? listed.slice(0, 4).join(", ") + (listed.length === 1 ? " exports" : " export") + " no " + what + " yet"
      : "No inference server found (vLLM, SGLang, llama.cpp, TensorRT-LLM, Ollama)";
    SparkChart.draw($("chart-serving"), Object.assign({}, base, {
      bands: bands, left: { fmt: (v) => num(v, 0), zero: true }, right: { fmt: (v) => num(v, Number.isInteger(v) ? 0 : 1), zero: true },
      series: serving, empty: lacking("token rate or queue"),
    }));
    SparkChart.draw($("chart-serving-latency"), Object.assign({}, base, {
      bands: bands, left: { fmt: (v) => num(v, 1) + " s", zero: true }, right: { fmt: (v) => num(v, 0) + "%", zero: true, max: 100 },
      series: latency, empty: lacking("time to first token or KV-cache use (llama.cpp exports neither)"),
    }));
  }

  // Energy per unit of work: J per training token and step of each running job, J per generated token per server.
  function renderEnergy() {
    const p = $("energy");
    const parts = [];
    const jobs = (state.status && state.status.extras && state.status.extras.job_energy) || {};
    for (const job of Object.keys(jobs).sort()) {
      const e = jobs[job] || {};
      if (e.joules_per_token != null) parts.push(job + " " + num(e.joules_per_token, 3) + " J/token" + (e.joules_per_step != null ? ", " + num(e.joules_per_step, 0) + " J/step" : ""));
    }
    for (const r of (state.status && state.status.serving) || []) {
      if (r.joules_per_token != null) parts.push(r.server + " " + num(r.joules_per_token, 3) + " J/token");
    }
    p.hidden = !parts.length;
    p.textContent = parts.length ? "Energy per unit of work (GPU energy counter): " + parts.join(" · ") : "";
  }

  function renderServing() {
    const tb = $("serving");
    const rows = (state.status && state.status.serving) || [];
    tb.textContent = "";
    if (!rows.length) {
      const tr = h("tr"), td = h("td", "empty", "No inference server found.");
      td.colSpan = 7;
      tr.appendChild(td);
      tb.appendChild(tr);
      return;
    }
    const opt = (v, f) => (v === null || v === undefined ? "–" : f(v));
    for (const r of rows) {
      const tr = h("tr");
      tr.dataset.kind = r.kind;
      const name = h("th", null, r.server + " ");
      name.scope = "row";
      let what = r.up ? (r.model || r.kind) : r.loading ? r.error || "loading" : "down: " + (r.error || "no answer");
      // Ollama: what it holds and when keep-alive unloads it (expires_at against the sample's time).
      const models = r.models || [];
      if (r.up && r.kind === "ollama") {
        const left = models.filter((m) => m.expires_at).map((m) => m.expires_at - (state.status.ts || r.ts));
        what = models.length ? models.length + " loaded" + (left.length ? ", unloads in " + num(Math.max(0, Math.min(...left)) / 60, 0) + " min" : "") : "no model loaded";
      }
      name.appendChild(h("span", r.up ? "pid" : "uncapped", what));
      tr.appendChild(name);
      tr.appendChild(h("td", "num", opt(r.generation_tokens_per_s, (v) => num(v, 1))));
      tr.appendChild(h("td", "num", r.up ? opt(r.requests_running, (v) => num(v, 0)) + " / " + opt(r.requests_waiting, (v) => num(v, 0)) : "–"));
      tr.appendChild(h("td", "num", opt(r.kv_usage, (v) => num(v * 100, 0) + " %")));
      tr.appendChild(h("td", "num", opt(r.ttft_p95_s, (v) => num(v, 2) + " s")));
      tr.appendChild(h("td", "num", opt(r.itl_p95_s, (v) => num(v * 1000, 0) + " ms")));
      tr.appendChild(h("td", "num", opt(r.joules_per_token, (v) => num(v, 2))));
      tb.appendChild(tr);
    }
  }

  function noGpuReason(st) {
    if (!st || (st.gpus && st.gpus.length) || state.records.some((r) => r.power_w != null || r.temp_c != null)) return undefined;
    const nv = (st.sources || []).find((x) => x.name === "nvml");
    if (nv && !nv.up) return "No GPU readings: NVML missing" + (nv.error ? " (" + String(nv.error).split(" (")[0] + ")" : "");
    return st.gpus ? "No GPU readings: NVML reports no GPU" : undefined;
  }

  /* The latest post-mortem bundle's report (same origin, self-contained HTML). */
  function renderPostmortem() {
    const p = $("postmortem"), pm = state.status && state.status.postmortem;
    if (!p) return;
    p.textContent = "";
    p.hidden = !(pm && pm.url && pm.url.charAt(0) === "/");
    if (p.hidden) return;
    const a = h("a", null, "Post-mortem of the last " + String(pm.kind).replace(/_/g, " ") + " (" + stamp(pm.ts, true) + ")");
    a.href = pm.url;
    p.appendChild(a);
    if (pm.summary) p.appendChild(h("span", "what", " " + pm.summary));
  }

  function renderEvents() {
    const seen = new Set(), all = [];
    const add = (e) => {
      const key = e.kind + "@" + e.ts;
      if (seen.has(key)) return;
      seen.add(key);
      all.push(e);
    };
    for (const r of state.records) for (const e of r.events || []) add(e);
    for (const e of (state.status && state.status.events) || []) add(e);
    all.sort((a, b) => b.ts - a.ts);
    renderPostmortem();
    const ol = $("events");
    ol.textContent = "";
    if (!all.length) { ol.appendChild(h("li", "empty", "No throttle, eviction, OOM kill, reboot or driver fault seen.")); return; }
    for (const e of all.slice(0, 100)) {
      const li = h("li");
      li.dataset.kind = e.kind;
      const t = h("time", null, stamp(e.ts));
      t.setAttribute("datetime", new Date((e.ts + (state.shift || 0)) * 1000).toISOString());
      li.appendChild(t);
      let label = EVENT_LABEL[e.kind] || e.kind;
      let cls = EVENT_CLASS[e.kind] || "";
      if (e.kind === "reboot" && e.after_throttle) label = "reboot after throttle";
      const d = e.details || {};
      // Driver faults: the Xid code in the label, fatal ones (reset / power cycle needed) marked bad.
      if (e.kind === "xid") { label = "Xid " + d.xid + (d.fatal ? " (fatal)" : ""); if (d.fatal) cls = "bad"; }
      if (d.previous_boot) label += " (previous boot)";
      // Who killed it (diagnose/exits.py): a killer's cause is bad, a plain exit is only news.
      // A member that exited after its workload's kill (details.follows, in events journaled by earlier releases,
      // which recent_events still carry after an upgrade) exited: news, not another kill.
      if (e.kind === "workload_exit") {
        const killed = d.cause !== "exit" && !d.follows;
        label = killed ? "workload killed" : "workload exited";
        if (killed) cls = "bad";
      }
      li.appendChild(h("span", "kind " + cls, (e.gotcha ? e.gotcha + " " : "") + label));
      li.appendChild(h("span", "what", e.summary || ""));
      ol.appendChild(li);
    }
  }

  function renderWorkloads() {
    const tb = $("workloads");
    const rows = (state.workloads && state.workloads.workloads) || [];
    tb.textContent = "";
    if (!rows.length) {
      const tr = h("tr"), td = h("td", "empty", state.workloads ? "No GPU-resident or known workload." : "No sample yet.");
      td.colSpan = 5;
      tr.appendChild(td);
      tb.appendChild(tr);
      return;
    }
    for (const w of rows) {
      const tr = h("tr");
      tr.dataset.kind = w.kind;
      const name = h("th", null, w.name + " ");
      name.scope = "row";
      // One row per workload: the launcher's pid and command line, and how many processes it spans.
      const n = (w.members || []).length;
      name.appendChild(h("span", "pid", "(" + w.pid + (n > 1 ? ", " + n + " processes" : "") + ")"));
      name.appendChild(h("span", "cmd", w.cmdline));
      name.querySelector(".cmd").title = w.cmdline;
      tr.appendChild(name);
      tr.appendChild(h("td", null, w.kind));
      const cap = w.capped === true ? "yes" + (w.cap !== null && w.cap !== undefined ? " (" + w.cap + ")" : "") : w.capped === false ? "no" : "–";
      tr.appendChild(h("td", w.capped === false ? "uncapped" : null, cap));
      tr.appendChild(h("td", "num", w.gpu_mem_bytes === null ? "n/a" : gib(w.gpu_mem_bytes)));
      tr.appendChild(h("td", "num", gib(w.footprint_bytes)));
      tb.appendChild(tr);
    }
  }

  for (const b of document.querySelectorAll(".range button")) {
    b.addEventListener("click", () => {
      state.hours = parseFloat(b.dataset.hours);
      try { localStorage.setItem("sparkwatchd.hours", String(state.hours)); } catch (e) { /* storage off */ }
      renderCharts();
    });
  }
  let resizeTimer = null;
  window.addEventListener("resize", () => { clearTimeout(resizeTimer); resizeTimer = setTimeout(renderCharts, 150); });
  loop();
})();
