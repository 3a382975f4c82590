/* Small SVG time-series charts for the spark-watchd status page (no library, no network).
 *
 * SparkChart.draw(figure, opts) renders into a <figure> (keeping its <figcaption>):
 *   opts.t0, opts.t1   x range, Unix seconds
 *   opts.series        [{label, k (colour 0-6), axis "l"|"r", dash, thin, points: [[t, v|null], ...], fmt}]
 *   opts.left/right    {fmt, zero, min, max}: y axes (right is optional)
 *   opts.bands         [[ta, tb], ...]: shaded periods (throttling)
 *   opts.gap           seconds without a point after which a line breaks (reboots, daemon down)
 */
"use strict";
(function () {
  const NS = "http://www.w3.org/2000/svg";
  const H = 190;
  const TIME_STEPS = [60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

  function el(name, attrs, parent) {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function niceStep(span, count) {
    const raw = span / Math.max(1, count);
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const norm = raw / mag;
    const nice = norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 2.5 ? 2.5 : norm <= 5 ? 5 : 10;
    return nice * mag;
  }

  function yRange(series, axis, spec) {
    let lo = Infinity, hi = -Infinity;
    for (const s of series) {
      if ((s.axis || "l") !== axis) continue;
      for (const p of s.points) {
        const v = p[1];
        if (v === null || !isFinite(v)) continue;
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
    }
    if (lo === Infinity) return null;
    if (spec.zero) lo = Math.min(lo, 0);
    if (spec.min !== undefined) lo = Math.min(lo, spec.min);
    if (spec.max !== undefined) hi = Math.max(hi, spec.max);
    const dataLo = lo;
    if (hi - lo < 1e-9) { const d = Math.abs(hi) * 0.1 || 1; lo -= d; hi += d; }
    if (spec.zero && dataLo >= 0) lo = Math.max(lo, 0); // a flat zero line sits on the axis, not mid-chart
    const step = niceStep(hi - lo, 4);
    lo = Math.floor(lo / step) * step;
    hi = Math.ceil(hi / step) * step;
    return { lo: lo, hi: hi, step: step };
  }

  function pad2(n) { return (n < 10 ? "0" : "") + n; }
  /* A replay serves trace time faster than the wall clock; the page shifts every printed time so the newest sample reads as now. */
  let timeShift = 0;
  function clock(t) { const d = new Date((t + timeShift) * 1000); return pad2(d.getHours()) + ":" + pad2(d.getMinutes()); }
  function setTimeShift(s) { timeShift = isFinite(s) ? s : 0; }

  /* Keep at most ~2 points per pixel column (first/min/max/last) so long 1 s replays stay light. */
  function decimate(points, xOf, width) {
    if (points.length <= width * 2) return points;
    const out = [];
    let col = null, bucket = [];
    const flush = () => {
      if (!bucket.length) return;
      let mn = bucket[0], mx = bucket[0];
      for (const p of bucket) {
        if (p[1] !== null && (mn[1] === null || p[1] < mn[1])) mn = p;
        if (p[1] !== null && (mx[1] === null || p[1] > mx[1])) mx = p;
      }
      const keep = [bucket[0], mn, mx, bucket[bucket.length - 1]].sort((a, b) => a[0] - b[0]);
      let prev = null;
      for (const p of keep) { if (p !== prev) out.push(p); prev = p; }
      bucket = [];
    };
    for (const p of points) {
      const c = Math.floor(xOf(p[0]));
      if (c !== col) { flush(); col = c; }
      bucket.push(p);
    }
    flush();
    return out;
  }

  function pathData(points, xOf, yOf, gap) {
    let d = "", pen = false, lastT = null, n = 0;
    for (const p of points) {
      const v = p[1];
      if (v === null || !isFinite(v) || (lastT !== null && gap && p[0] - lastT > gap)) pen = false;
      if (v !== null && isFinite(v)) {
        d += (pen ? "L" : "M") + xOf(p[0]).toFixed(1) + " " + yOf(v).toFixed(1);
        pen = true;
        n++;
      }
      lastT = p[0];
    }
    return { d: d, n: n };
  }

  function valueAt(points, t) {
    // Nearest point at or before t (points are in time order).
    let lo = 0, hi = points.length - 1, best = null;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (points[mid][0] <= t) { best = points[mid]; lo = mid + 1; } else hi = mid - 1;
    }
    return best;
  }

  function lastValue(points) {
    for (let i = points.length - 1; i >= 0; i--) if (points[i][1] !== null && isFinite(points[i][1])) return points[i];
    return null;
  }

  /* The empty-chart message folded into lines that fit the chart (a long reason on a phone is not cut off). */
  function nodata(svg, message, W, H) {
    const text = el("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "nodata" }, svg);
    const lines = [];
    let line = null;
    for (const word of String(message).split(/\s+/)) {
      const next = line === null ? word : line.textContent + " " + word;
      if (line === null) {
        line = el("tspan", { x: W / 2 }, text);
        line.textContent = next;
        lines.push(line);
        continue;
      }
      line.textContent = next;
      if (line.getComputedTextLength() > W - 24) {
        line.textContent = next.slice(0, next.length - word.length - 1);
        line = el("tspan", { x: W / 2 }, text);
        line.textContent = word;
        lines.push(line);
      }
    }
    const lh = 16;
    lines.forEach((t, i) => {
      t.setAttribute("y", H / 2 + (i - (lines.length - 1) / 2) * lh);
      if (i < lines.length - 1) t.textContent += " ";  // the text still reads as one sentence
    });
    return text;
  }

  function draw(figure, opts) {
    let svg = figure.querySelector("svg");
    if (!svg) {
      svg = el("svg", { role: "img", focusable: "false" }, null);
      figure.appendChild(svg);
      const legend = document.createElement("ul");
      legend.className = "legend";
      figure.appendChild(legend);
      svg.addEventListener("mousemove", (ev) => hover(figure, ev));
      svg.addEventListener("mouseleave", () => hover(figure, null));
    }
    figure._opts = opts;
    const W = Math.max(280, Math.round(svg.getBoundingClientRect().width) || 600);
    const caption = (figure.querySelector("figcaption") || {}).textContent || "chart";
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    const title = el("title", {}, svg);

    const series = opts.series.filter((s) => s.points.length);
    const left = yRange(series, "l", opts.left || {});
    const right = opts.right ? yRange(series, "r", opts.right) : null;
    const pad = { l: 50, r: right ? 52 : 14, t: 8, b: 22 };
    const pw = W - pad.l - pad.r, ph = H - pad.t - pad.b;
    const t0 = opts.t0, t1 = Math.max(opts.t1, opts.t0 + 1);
    const xOf = (t) => pad.l + ((t - t0) / (t1 - t0)) * pw;
    figure._geom = { xOf: xOf, t0: t0, t1: t1, pad: pad, pw: pw, W: W };

    const hasData = series.some((s) => s.points.some((p) => p[1] !== null && isFinite(p[1])));
    if (!hasData || !left) {
      nodata(svg, opts.empty || "No data yet", W, H);
      title.textContent = caption + ": no data";
      svg.setAttribute("aria-label", title.textContent);
      renderLegend(figure, series, null);
      return;
    }

    for (const b of opts.bands || []) {
      const xa = Math.max(pad.l, xOf(b[0])), xb = Math.min(pad.l + pw, xOf(b[1]));
      if (xb > xa) el("rect", { x: xa.toFixed(1), y: pad.t, width: Math.max(1, xb - xa).toFixed(1), height: ph, class: "band" }, svg);
    }
    const yOfAxis = (r) => (v) => pad.t + ph - ((v - r.lo) / (r.hi - r.lo)) * ph;
    const yl = yOfAxis(left), yr = right ? yOfAxis(right) : null;
    const fmtL = (opts.left && opts.left.fmt) || String, fmtR = (opts.right && opts.right.fmt) || String;
    for (let v = left.lo; v <= left.hi + left.step / 2; v += left.step) {
      const y = yl(v);
      el("line", { x1: pad.l, x2: pad.l + pw, y1: y.toFixed(1), y2: y.toFixed(1), class: "grid" }, svg);
      el("text", { x: pad.l - 5, y: (y + 4).toFixed(1), "text-anchor": "end", class: "axis" }, svg).textContent = fmtL(v);
    }
    if (right) {
      for (let v = right.lo; v <= right.hi + right.step / 2; v += right.step) {
        el("text", { x: pad.l + pw + 5, y: (yr(v) + 4).toFixed(1), class: "axis" }, svg).textContent = fmtR(v);
      }
    }
    const span = t1 - t0;
    const step = TIME_STEPS.find((s) => span / s <= Math.max(2, Math.floor(pw / 90))) || 86400;
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
      const x = xOf(t);
      el("line", { x1: x.toFixed(1), x2: x.toFixed(1), y1: pad.t, y2: pad.t + ph, class: "grid" }, svg);
      el("text", { x: x.toFixed(1), y: H - 6, "text-anchor": "middle", class: "axis" }, svg).textContent = clock(t);
    }
    for (const s of series) {
      const yOf = (s.axis || "l") === "r" && yr ? yr : yl;
      const pts = decimate(s.points.filter((p) => p[0] >= t0 && p[0] <= t1), xOf, pw);
      const pd = pathData(pts, xOf, yOf, opts.gap);
      if (!pd.n) continue;
      const cls = "line k" + (s.k || 0) + (s.dash ? " dash" : "") + (s.thin ? " thin" : "");
      el("path", { d: pd.d, class: cls, "data-series": s.label, "data-points": pd.n }, svg);
    }
    el("line", { x1: -10, x2: -10, y1: pad.t, y2: pad.t + ph, class: "cursor", visibility: "hidden" }, svg);
    const summary = series
      .map((s) => { const lv = lastValue(s.points); return lv ? s.label + " " + (s.fmt || String)(lv[1]) : null; })
      .filter(Boolean).join(", ");
    title.textContent = caption + " from " + clock(t0) + " to " + clock(t1) + (summary ? "; latest: " + summary : "");
    svg.setAttribute("aria-label", title.textContent);
    renderLegend(figure, series, null);
  }

  function renderLegend(figure, series, t) {
    const legend = figure.querySelector(".legend");
    if (!legend) return;
    legend.textContent = "";
    for (const s of series) {
      const li = document.createElement("li");
      const sw = document.createElement("span");
      sw.className = "sw k" + (s.k || 0) + (s.dash ? " dash" : "");
      li.appendChild(sw);
      li.appendChild(document.createTextNode(s.label + " "));
      // An ended series (a training job that stopped reporting) has no current value: "–", not its last one.
      const p = t === null ? (s.ended ? null : lastValue(s.points)) : valueAt(s.points, t);
      const b = document.createElement("b");
      b.textContent = p && p[1] !== null && isFinite(p[1]) ? (s.fmt || String)(p[1]) : "–";
      li.appendChild(b);
      legend.appendChild(li);
    }
    if (t !== null) {
      const li = document.createElement("li");
      li.textContent = "at " + clock(t);
      legend.appendChild(li);
    }
  }

  function hover(figure, ev) {
    const g = figure._geom, opts = figure._opts, svg = figure.querySelector("svg");
    if (!g || !opts || !svg) return;
    const cursor = svg.querySelector(".cursor");
    const series = opts.series.filter((s) => s.points.length);
    if (!ev) {
      if (cursor) cursor.setAttribute("visibility", "hidden");
      renderLegend(figure, series, null);
      return;
    }
    const rect = svg.getBoundingClientRect();
    const x = ((ev.clientX - rect.left) / rect.width) * g.W;
    if (x < g.pad.l || x > g.pad.l + g.pw) return;
    const t = g.t0 + ((x - g.pad.l) / g.pw) * (g.t1 - g.t0);
    if (cursor) {
      cursor.setAttribute("x1", x.toFixed(1));
      cursor.setAttribute("x2", x.toFixed(1));
      cursor.setAttribute("visibility", "visible");
    }
    renderLegend(figure, series, t);
  }

  window.SparkChart = { draw: draw, clock: clock, setTimeShift: setTimeShift };
})();
