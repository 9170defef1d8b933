"use strict";
// The timeline page: one time axis, a lane group per process. Live, it
// polls the extension's snapshot API while the tab is visible; from a file,
// it draws the snapshot embedded in the page.
(function () {
  const cfg = JSON.parse(document.getElementById("timeline-config").textContent);
  const NS = "http://www.w3.org/2000/svg";
  const KINDS = ["jvm.safepoint", "jvm.gc.pause", "python.gil.wait", "python.gil.released", "python.gc.pause"];
  const JVM = new Set(["jvm.safepoint", "jvm.gc.pause"]);
  const PY = new Set(["python.gil.wait", "python.gil.released", "python.gc.pause"]);
  const LABEL_W = 190, ROW_H = 16, GAP = 3, HEAD_H = 18, AXIS_H = 22, MAX_SPAN_ROWS = 6;
  const $ = (id) => document.getElementById(id);
  const chart = $("chart"), tip = $("tip"), status = $("status");

  const view = { from: 0, to: 0, follow: !!cfg.live, len: (cfg.last || 30000) };
  let snap = null; // the snapshot drawn, times made absolute (ms)
  let inflight = false, timer = null;
  // viewGen counts view changes: an answer to a request made for an older
  // view is dropped and asked again.
  let viewGen = 0;

  // toAbs turns a snapshot's relative ns into absolute ms.
  function toAbs(s) {
    const b = s.baseMs;
    const ms = (ns) => b + ns / 1e6;
    return {
      raw: s,
      from: ms(s.from), to: ms(s.to),
      lanes: s.lanes || [],
      windows: (s.windows || []).map((w) => ({ ...w, t0: ms(w.s), t1: ms(w.s + w.d) })),
      summary: (s.summary || []).map((b2) => ({ ...b2, t0: ms(b2.s), t1: ms(b2.s + b2.d) })),
      spans: (s.spans || []).map((p) => ({ ...p, t0: ms(p.s), t1: ms(p.s + p.d) })),
      gpu: (s.gpu || []).map((g) => ({ ...g, t: ms(g.t) })),
      accounts: (s.accounts || []).map((a) => ({ ...a, t: ms(a.t) })),
      inRange: s.windowsInRange || 0,
      recording: s.recording,
    };
  }

  function nsString(ms) {
    return (BigInt(Math.round(ms * 1000)) * 1000n).toString();
  }

  function filters() {
    const kinds = KINDS.filter((k) => $("k-" + k).checked);
    if ($("k-span").checked) kinds.push("span");
    if ($("k-gpu").checked) kinds.push("gpu");
    if ($("k-accounts").checked) kinds.push("accounts");
    return { pod: $("pod").value, pid: $("pid").value, kinds };
  }

  function plotWidth() {
    return Math.max(200, chart.parentElement.clientWidth - LABEL_W - 16);
  }

  // --- data: live from the API, or the embedded snapshot ---------------

  function poll() {
    if (!cfg.live || inflight || document.hidden) return;
    const f = filters();
    const p = new URLSearchParams();
    if (view.follow) {
      p.set("last", Math.max(1, Math.round(view.len)) + "ms");
    } else {
      p.set("from", nsString(view.from));
      p.set("to", nsString(view.to));
    }
    if (f.pod) p.set("pod", f.pod);
    if (f.pid) p.set("pid", f.pid);
    if (f.kinds.length < KINDS.length + 2) p.set("kind", f.kinds.join(",") || "span");
    p.set("buckets", String(Math.min(4000, Math.round(plotWidth() / 2))));
    inflight = true;
    const gen = viewGen;
    fetch(cfg.api + "?" + p.toString(), { cache: "no-store" })
      .then((r) => r.ok ? r.json() : r.text().then((t) => { throw new Error(r.status + ": " + t.trim()); }))
      .then((s) => {
        if (gen !== viewGen) { setTimeout(poll, 0); return; }
        snap = toAbs(s);
        if (view.follow) { view.from = snap.from; view.to = snap.to; }
        setStatus("");
        draw();
      })
      .catch((e) => setStatus(String(e.message || e), true))
      .finally(() => { inflight = false; });
  }

  // fromEmbedded cuts the embedded snapshot to the view and the filters,
  // summarising windows beyond cfg.maxWindows as the API does.
  function fromEmbedded() {
    const all = embedded;
    const f = filters();
    const keep = new Set(all.lanes.filter((l) => laneWanted(l, f)).map((l) => l.id));
    const inView = (a) => keep.has(a.lane) && a.t1 >= view.from && a.t0 <= view.to;
    const windows = f.kinds.length ? all.windows.filter((w) => f.kinds.includes(w.kind) && inView(w)) : [];
    const s = {
      raw: all.raw, from: view.from, to: view.to, lanes: all.lanes, recording: true,
      spans: f.kinds.includes("span") ? all.spans.filter(inView) : [],
      gpu: f.kinds.includes("gpu") ? all.gpu.filter((g) => keep.has(g.lane)) : [],
      accounts: f.kinds.includes("accounts") ? all.accounts.filter((a) => keep.has(a.lane)) : [],
      windows, summary: [], inRange: windows.length,
    };
    if (windows.length > cfg.maxWindows) {
      s.summary = summarize(windows, view.from, view.to, Math.round(plotWidth() / 2));
      s.windows = [];
    }
    snap = s;
    draw();
  }

  function summarize(ws, from, to, n) {
    const width = (to - from) / n, at = new Map(), out = [];
    for (const w of ws) {
      const first = Math.max(0, Math.floor((w.t0 - from) / width));
      const last = Math.min(n - 1, Math.floor((w.t1 - from) / width));
      for (let b = first; b <= last; b++) {
        const key = w.lane + "|" + w.kind + "|" + b;
        let e = at.get(key);
        if (!e) {
          e = { lane: w.lane, kind: w.kind, t0: from + b * width, t1: from + (b + 1) * width, count: 0, busy: 0 };
          at.set(key, e); out.push(e);
        }
        if (b === first) e.count++;
        e.busy += Math.max(0, Math.min(e.t1, w.t1) - Math.max(e.t0, w.t0)) * 1e6;
      }
    }
    return out;
  }

  function laneWanted(l, f) {
    if (f.pid && String(l.pid) !== f.pid) return false;
    return !f.pod || l.pod === f.pod || l.podUid === f.pod;
  }

  function refresh() {
    if (cfg.live) poll(); else fromEmbedded();
  }

  // --- drawing ------------------------------------------------------------

  function el(name, attrs, parent) {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  // stack places overlapping spans in rows, greedily, at most max rows.
  function stack(items, max) {
    const ends = [];
    for (const it of items.slice().sort((a, b) => a.t0 - b.t0)) {
      let r = ends.findIndex((e) => e <= it.t0);
      if (r < 0) r = ends.length < max ? ends.length : ends.indexOf(Math.min(...ends));
      ends[r] = Math.max(ends[r] || -Infinity, it.t1);
      it.row = r;
    }
    return Math.max(1, ends.length);
  }

  // overlaps returns where a group's JVM pauses (merged into disjoint
  // intervals) intersect its Python windows.
  function overlaps(ws) {
    const merged = [];
    for (const w of ws.filter((v) => JVM.has(v.kind)).sort((a, b) => a.t0 - b.t0)) {
      const last = merged[merged.length - 1];
      if (last && w.t0 <= last[1]) last[1] = Math.max(last[1], w.t1);
      else merged.push([w.t0, w.t1]);
    }
    const out = [];
    for (const p of ws) {
      if (!PY.has(p.kind)) continue;
      let lo = 0, hi = merged.length;
      while (lo < hi) { const m = (lo + hi) >> 1; if (merged[m][1] <= p.t0) lo = m + 1; else hi = m; }
      for (let j = lo; j < merged.length && merged[j][0] < p.t1; j++) {
        const a = Math.max(p.t0, merged[j][0]), b = Math.min(p.t1, merged[j][1]);
        if (b > a) out.push([a, b]);
      }
    }
    return out;
  }

  function draw() {
    if (!snap) return;
    const W = plotWidth(), from = view.from, to = view.to;
    const span = Math.max(1e-6, to - from);
    const x = (t) => LABEL_W + ((t - from) / span) * W;
    const f = filters();
    chart.textContent = "";
    chart.setAttribute("width", LABEL_W + W + 8);
    chart.dataset.fromMs = String(from);
    chart.dataset.toMs = String(to);
    chart.dataset.plotX = String(LABEL_W);
    chart.dataset.plotW = String(W);
    chart.dataset.mode = snap.summary.length ? "summary" : "windows";
    if (window.timeline && !window.timeline.firstDrawn) window.timeline.firstDrawn = performance.now();

    const byLane = new Map();
    const group = (id) => {
      if (!byLane.has(id)) byLane.set(id, { windows: [], summary: [], spans: [], gpu: [], accounts: [] });
      return byLane.get(id);
    };
    snap.windows.forEach((w, i) => { w.i = i; group(w.lane).windows.push(w); });
    snap.summary.forEach((b, i) => { b.i = i; group(b.lane).summary.push(b); });
    snap.spans.forEach((p, i) => { p.i = i; group(p.lane).spans.push(p); });
    snap.gpu.forEach((g, i) => { g.i = i; group(g.lane).gpu.push(g); });
    (snap.accounts || []).forEach((a, i) => { a.i = i; group(a.lane).accounts.push(a); });

    // axis
    let y = 0;
    const axis = el("g", { class: "axis" }, chart);
    const step = niceStep(span / Math.max(2, W / 110));
    for (let t = Math.ceil(from / step) * step; t <= to; t += step) {
      el("line", { class: "tick", x1: x(t), x2: x(t), y1: AXIS_H - 6, y2: AXIS_H }, axis);
      const lbl = el("text", { class: "ticklabel", x: x(t) + 2, y: AXIS_H - 9 }, axis);
      lbl.textContent = clock(t, step);
    }
    y = AXIS_H;

    let drawnWindows = 0, drawnSpans = 0, lanesDrawn = 0;
    for (const lane of snap.lanes) {
      const g = byLane.get(lane.id);
      if (!g || !laneWanted(lane, f)) continue;
      lanesDrawn++;
      const top = y;
      const lg = el("g", { class: "lane", "data-lane": lane.id, "data-name": lane.name }, chart);
      const plot = lg;
      const labels = [];
      const bg = el("rect", { class: "lanebg", x: 0, y: top, width: LABEL_W + W, height: 0 }, lg);
      const name = el("text", { class: "lanelabel", x: 4, y: top + 13 }, lg);
      name.textContent = lane.name;
      labels.push(name);
      y += HEAD_H;
      const rowLabel = (text, ry) => {
        const t = el("text", { class: "rowlabel", x: 12, y: ry + ROW_H - 4 }, lg);
        t.textContent = text;
        labels.push(t);
      };
      const ovTop = y;
      // spans
      if (g.spans.length) {
        const rows = stack(g.spans, MAX_SPAN_ROWS);
        rowLabel("spans", y);
        for (const p of g.spans) {
          const x0 = x(p.t0);
          el("rect", { class: "span", x: x0, y: y + p.row * ROW_H + 1, width: Math.max(1, x(p.t1) - x0), height: ROW_H - 2,
            "data-i": p.i, "data-t0": p.t0, "data-t1": p.t1, "data-span": p.span }, plot);
          drawnSpans++;
        }
        y += rows * ROW_H + GAP;
      }
      // windows, one row for the JVM, one per Python thread, one for Python GC
      const rows = [];
      const rowOf = new Map();
      const rowFor = (w) => {
        let key, label;
        if (JVM.has(w.kind)) { key = "jvm"; label = "JVM pauses"; }
        else if (w.kind === "python.gc.pause") { key = "pygc"; label = "Python GC"; }
        else {
          key = "t" + (w.tid || 0);
          const tn = lane.threads && lane.threads[w.tid];
          label = "GIL " + (tn ? tn + " (" + w.tid + ")" : "thread " + (w.tid || "?"));
        }
        if (!rowOf.has(key)) { rowOf.set(key, rows.length); rows.push({ key, label }); }
        return rowOf.get(key);
      };
      const order = (k) => k === "jvm" ? 0 : k === "pygc" ? 2 : 1;
      g.windows.forEach(rowFor); g.summary.forEach(rowFor);
      const sorted = rows.map((r, i) => ({ ...r, i })).sort((a, b) => order(a.key) - order(b.key) || a.key.localeCompare(b.key, undefined, { numeric: true }));
      const rowY = new Map();
      for (const r of sorted) { rowY.set(r.i, y); rowLabel(r.label, y); y += ROW_H; }
      for (const w of g.windows) {
        const x0 = x(w.t0);
        el("rect", { class: "win " + w.kind.replace(/\./g, "-"), x: x0, y: rowY.get(rowOf.get(rowKey(w))) + 2, width: Math.max(1, x(w.t1) - x0), height: ROW_H - 4,
          "data-i": w.i, "data-kind": w.kind, "data-t0": w.t0, "data-t1": w.t1 }, plot);
        drawnWindows++;
      }
      for (const b of g.summary) {
        const x0 = x(b.t0), frac = Math.min(1, b.busy / 1e6 / Math.max(1e-9, b.t1 - b.t0));
        el("rect", { class: "bucket " + b.kind.replace(/\./g, "-"), x: x0, y: rowY.get(rowOf.get(rowKey(b))) + 2, width: Math.max(1, x(b.t1) - x0), height: ROW_H - 4,
          "fill-opacity": (0.25 + 0.75 * frac).toFixed(3), "data-i": b.i, "data-kind": b.kind, "data-count": b.count }, plot);
      }
      if (g.windows.length) {
        for (const [a, b] of overlaps(g.windows)) {
          el("rect", { class: "overlap", x: x(a), y: ovTop, width: Math.max(1, x(b) - x(a)), height: y - ovTop, "data-t0": a, "data-t1": b }, plot);
        }
      }
      // GPU memory, one line per device
      if (g.gpu.length) {
        rowLabel("GPU memory", y);
        const maxB = Math.max(...g.gpu.map((p) => p.bytes), 1);
        const devs = new Map();
        g.gpu.forEach((p) => { if (!devs.has(p.device)) devs.set(p.device, []); devs.get(p.device).push(p); });
        for (const [dev, pts] of devs) {
          pts.sort((a, b) => a.t - b.t);
          const d = pts.map((p) => x(p.t).toFixed(1) + "," + (y + 2 * ROW_H - 2 - (p.bytes / maxB) * (2 * ROW_H - 4)).toFixed(1)).join(" ");
          el("polyline", { class: "gpu", points: d, "data-device": dev, "data-max": maxB, "data-last": pts[pts.length - 1].bytes }, plot);
        }
        y += 2 * ROW_H;
      }
      // JVM memory accounts, one line each, each scaled to its own range
      // (bytes and references side by side: the shape is what tells).
      if (g.accounts.length) {
        rowLabel("JVM accounts", y);
        const accts = new Map();
        g.accounts.forEach((p) => { if (!accts.has(p.account)) accts.set(p.account, []); accts.get(p.account).push(p); });
        for (const [name, pts] of accts) {
          pts.sort((a, b) => a.t - b.t);
          const lo = Math.min(...pts.map((p) => p.value)), hi = Math.max(...pts.map((p) => p.value));
          const span = Math.max(hi - lo, 1);
          const d = pts.map((p) => x(p.t).toFixed(1) + "," + (y + 2 * ROW_H - 2 - ((p.value - lo) / span) * (2 * ROW_H - 4)).toFixed(1)).join(" ");
          el("polyline", { class: "account account-" + name, points: d, "data-account": name, "data-min": lo, "data-max": hi, "data-last": pts[pts.length - 1].value }, plot);
        }
        y += 2 * ROW_H;
      }
      y += GAP;
      bg.setAttribute("height", y - top);
      // The labels stay readable over spans begun before the view.
      el("rect", { class: "labelmask", x: 0, y: top, width: LABEL_W, height: y - top }, lg);
      labels.forEach((l) => lg.appendChild(l));
      y += GAP;
    }
    chart.setAttribute("height", Math.max(y, 60));
    chart.dataset.lanes = String(lanesDrawn);
    chart.dataset.windows = String(drawnWindows);
    chart.dataset.spans = String(drawnSpans);
    $("empty").style.display = lanesDrawn ? "none" : "block";
    const sum = snap.summary.length ? " (summary: " + snap.inRange + " windows in view, zoom in for each)" : "";
    $("counts").textContent = lanesDrawn + " processes, " + drawnSpans + " spans, " + (snap.summary.length ? snap.inRange : drawnWindows) + " windows" + sum +
      (cfg.live && !snap.recording ? "; spans recorded from now on" : "");
    populateFilters();
  }

  function rowKey(w) {
    if (JVM.has(w.kind)) return "jvm";
    if (w.kind === "python.gc.pause") return "pygc";
    return "t" + (w.tid || 0);
  }

  function niceStep(raw) {
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }
  function clock(ms, step) {
    const d = new Date(ms);
    const hh = String(d.getHours()).padStart(2, "0"), mm = String(d.getMinutes()).padStart(2, "0"), ss = String(d.getSeconds()).padStart(2, "0");
    if (step >= 1000) return hh + ":" + mm + ":" + ss;
    const frac = (ms / 1000 - Math.floor(ms / 1000)).toFixed(step >= 10 ? 2 : 3).slice(1);
    return mm + ":" + ss + frac;
  }
  function dur(ns) {
    if (ns >= 1e9) return (ns / 1e9).toFixed(3) + " s";
    if (ns >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
    if (ns >= 1e3) return (ns / 1e3).toFixed(1) + " µs";
    return ns + " ns";
  }

  function populateFilters() {
    const pods = [...new Set(snap.lanes.map((l) => l.pod).filter(Boolean))].sort();
    fill($("pod"), pods.map((p) => [p, p]));
    fill($("pid"), snap.lanes.filter((l) => l.pid).map((l) => [String(l.pid), l.name]));
  }
  function fill(sel, opts) {
    const cur = sel.value;
    const want = "|" + opts.map((o) => o[0]).join("|");
    if (sel.dataset.opts === want) return;
    sel.dataset.opts = want;
    sel.length = 1;
    for (const [v, t] of opts) sel.add(new Option(t, v));
    sel.value = opts.some((o) => o[0] === cur) ? cur : "";
  }

  // --- hover ----------------------------------------------------------------

  function describe(target) {
    const i = Number(target.dataset.i);
    const lane = (id) => (snap.lanes.find((l) => l.id === id) || { name: "?" });
    if (target.classList.contains("span")) {
      const p = snap.spans[i];
      let t = p.name + "\n" + dur(p.d) + " · " + lane(p.lane).name + "\ntrace " + p.trace + " span " + p.span;
      const ov = p.overlap || {};
      const ks = Object.keys(ov).sort();
      t += ks.length ? "\noverlapped by:" : "\nno window overlapped it";
      for (const k of ks) t += "\n  " + k + ": " + ov[k].count + " × , " + dur(ov[k].duration);
      for (const k of Object.keys(p.scores || {}).sort()) {
        const v = p.scores[k];
        t += "\n" + k + " = " + (typeof v === "number" ? Number(v.toPrecision(4)) : v);
      }
      return t;
    }
    if (target.classList.contains("win")) {
      const w = snap.windows[i];
      const tn = lane(w.lane).threads && lane(w.lane).threads[w.tid];
      let t = w.kind + " · " + dur(w.d);
      if (w.detail) t += "\n" + (w.kind === "jvm.safepoint" ? "VM operation: " : w.kind === "jvm.gc.pause" ? "GC: " : "") + w.detail;
      if (w.cause) t += "\ncause: " + w.cause;
      if (w.tid) t += "\nthread " + (tn ? tn + " (" + w.tid + ")" : w.tid);
      return t + "\n" + lane(w.lane).name;
    }
    if (target.classList.contains("bucket")) {
      const b = snap.summary[i];
      return b.kind + ": " + b.count + " windows, " + dur(b.busy) + " busy in " + dur(Math.round((b.t1 - b.t0) * 1e6));
    }
    return "";
  }

  chart.addEventListener("mousemove", (e) => {
    const text = drag ? "" : describe(e.target);
    tip.textContent = text;
    tip.style.display = text ? "block" : "none";
    tip.style.left = Math.min(e.clientX + 12, window.innerWidth - 300) + "px";
    tip.style.top = e.clientY + 14 + "px";
  });
  chart.addEventListener("mouseleave", () => { tip.style.display = "none"; });

  // --- zoom, pan, range -----------------------------------------------------

  function setView(from, to, follow) {
    view.from = from; view.to = to; view.len = to - from; view.follow = follow;
    viewGen++;
    $("follow").checked = follow;
    refresh();
  }
  function zoom(factor, atMs) {
    const at = atMs === undefined ? (view.from + view.to) / 2 : atMs;
    const len = Math.max(0.01, (view.to - view.from) * factor);
    const r = (at - view.from) / (view.to - view.from);
    setView(at - r * len, at - r * len + len, false);
  }
  chart.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = chart.getBoundingClientRect();
    const px = e.clientX - r.left - LABEL_W;
    zoom(e.deltaY < 0 ? 0.8 : 1.25, view.from + (px / plotWidth()) * (view.to - view.from));
  }, { passive: false });
  let drag = null;
  chart.addEventListener("mousedown", (e) => { drag = { x: e.clientX, from: view.from, to: view.to }; chart.classList.add("dragging"); });
  window.addEventListener("mouseup", () => { drag = null; chart.classList.remove("dragging"); });
  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    const dt = ((e.clientX - drag.x) / plotWidth()) * (drag.to - drag.from);
    if (Math.abs(e.clientX - drag.x) < 2) return;
    setView(drag.from - dt, drag.to - dt, false);
  });
  $("zoomin").onclick = () => zoom(0.5);
  $("zoomout").onclick = () => zoom(2);
  $("range").onchange = (e) => {
    const v = e.target.value;
    if (v === "all" && !cfg.live) { setView(embedded.from, embedded.to, false); return; }
    const len = Number(v);
    if (cfg.live) setView(view.to - len, view.to, $("follow").checked);
    else setView(view.to - len, view.to, false);
  };
  $("follow").onchange = (e) => { view.follow = e.target.checked && cfg.live; refresh(); };
  for (const id of ["pod", "pid"]) $(id).onchange = refresh;
  for (const k of KINDS.concat(["span", "gpu", "accounts"])) $("k-" + k).onchange = refresh;
  window.addEventListener("resize", () => draw());

  function setStatus(text, isError) {
    status.textContent = text;
    status.classList.toggle("error", !!isError);
  }

  // the test hooks: window.timeline lets a test read what was drawn and set
  // the view exactly.
  window.timeline = { view, setView, zoom, get snapshot() { return snap; }, refresh };

  let embedded = null;
  if (cfg.live) {
    $("follow").disabled = false;
    poll();
    timer = setInterval(poll, cfg.pollMs || 1000);
    document.addEventListener("visibilitychange", () => { if (!document.hidden) poll(); });
  } else {
    $("follow").disabled = true;
    embedded = toAbs(cfg.data);
    $("range").value = "all";
    setView(embedded.from, embedded.to, false);
  }
  void timer;
})();
