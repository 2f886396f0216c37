// The Weir dashboard: draws the job graph from /api/job and keeps it, the
// checkpoint history and the event list live from the server-sent events of
// /api/stream. Text from the job (ids, messages, paths) is only ever set as
// textContent, never parsed as HTML.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const NODE_W = 250;
const NODE_H = 122;
const GAP_X = 84;
const GAP_Y = 26;
const PAD = 14;
const BAR_X = 160; // the backpressure bar, right of its label
const BAR_W = 58;
const CHECKPOINT_ROWS = 25;

const compact = new Intl.NumberFormat("en", { notation: "compact", maximumFractionDigits: 1 });
const whole = new Intl.NumberFormat("en");

const state = {
  graphKey: null, // node ids and edges the drawn graph shows
  nodes: new Map(), // id -> {group, texts, bar, layer, index}
  layers: [], // node ids per layer, top to bottom
  selected: null,
  job: null,
  failures: 0,
};

const $ = (id) => document.getElementById(id);

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function count(n) {
  return n == null ? "–" : compact.format(n);
}

function rate(r) {
  return r == null ? "–/s" : compact.format(r) + "/s";
}

function bytes(n) {
  if (n == null) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i += 1;
  }
  return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
}

function duration(ms) {
  const s = Math.floor(ms / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (h > 0) return `${h} h ${m} min`;
  if (m > 0) return `${m} min ${s % 60} s`;
  return `${s} s`;
}

// One formatter for every time of day: building one per call costs more
// than the rest of a render.
const timeOfDay = new Intl.DateTimeFormat("en-GB", { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });

function clock(ms) {
  return timeOfDay.format(ms);
}

function seconds(s) {
  return s < 1 ? `${(s * 1000).toFixed(s < 0.01 ? 1 : 0)} ms` : `${s.toFixed(s < 10 ? 1 : 0)} s`;
}

// The upper bound of the bucket holding quantile `q` of a histogram
// `{count, buckets: [[le, n], ...]}` (buckets not cumulative).
function quantile(h, q) {
  const want = q * h.count;
  let seen = 0;
  for (const [le, n] of h.buckets) {
    seen += n;
    if (seen >= want) return `≤ ${seconds(le)}`;
  }
  return `> ${seconds(h.buckets[h.buckets.length - 1][0])}`;
}

// One bar per bucket, as a share of the records.
function latencyHistogram(h) {
  const t = el("table", { class: "histogram" });
  const last = h.buckets[h.buckets.length - 1][0];
  const over = h.count - h.buckets.reduce((a, [, n]) => a + n, 0);
  const rows = h.buckets.map(([le, n]) => [`≤ ${seconds(le)}`, n]).concat([[`> ${seconds(last)}`, over]]);
  const body = el("tbody");
  for (const [label, n] of rows) {
    if (n === 0) continue;
    const share = n / h.count;
    const tr = el("tr");
    tr.append(el("th", { scope: "row" }, label));
    const cell = el("td", { class: "share" });
    const bar = el("span");
    // Through the CSSOM: the page's policy refuses inline style attributes.
    bar.style.width = `${Math.max(1, Math.round(share * 100))}%`;
    cell.append(bar);
    tr.append(cell, el("td", {}, `${(share * 100).toFixed(1)}%`));
    body.append(tr);
  }
  t.append(body);
  return t;
}

// A watermark: milliseconds since the epoch (UTC), "end", or none.
function watermark(w) {
  if (w == null) return "none";
  if (w === "end") return "end of input";
  const d = new Date(w);
  if (Number.isNaN(d.getTime())) return String(w);
  return d.toISOString().replace("T", " ").replace("Z", " UTC");
}

// ---- the graph ----------------------------------------------------------

// Layers by longest path from the sources; within a layer, nodes ordered
// by the mean position of their upstreams (job order first).
function layout(nodes, edges) {
  const ups = new Map(nodes.map((n) => [n.id, []]));
  for (const e of edges) if (ups.has(e.to)) ups.get(e.to).push(e.from);
  const layerOf = new Map();
  const layer = (id, seen) => {
    if (layerOf.has(id)) return layerOf.get(id);
    if (seen.has(id)) return 0; // a cycle cannot pass validation; be safe
    seen.add(id);
    const from = ups.get(id) || [];
    const l = from.length === 0 ? 0 : 1 + Math.max(...from.map((u) => layer(u, seen)));
    layerOf.set(id, l);
    return l;
  };
  nodes.forEach((n) => layer(n.id, new Set()));
  const layers = [];
  nodes.forEach((n) => {
    const l = layerOf.get(n.id);
    (layers[l] = layers[l] || []).push(n.id);
  });
  const position = new Map();
  layers.forEach((ids, l) => {
    if (l > 0) {
      const mean = (id) => {
        const p = (ups.get(id) || []).map((u) => position.get(u)).filter((x) => x != null);
        return p.length ? p.reduce((a, b) => a + b, 0) / p.length : 0;
      };
      ids.sort((a, b) => mean(a) - mean(b));
    }
    ids.forEach((id, i) => position.set(id, i));
  });
  const tallest = Math.max(...layers.map((ids) => ids.length));
  const at = new Map();
  layers.forEach((ids, l) => {
    const offset = ((tallest - ids.length) * (NODE_H + GAP_Y)) / 2;
    ids.forEach((id, i) => {
      at.set(id, { x: PAD + l * (NODE_W + GAP_X), y: PAD + offset + i * (NODE_H + GAP_Y), layer: l, index: i });
    });
  });
  const width = PAD * 2 + layers.length * NODE_W + (layers.length - 1) * GAP_X;
  const height = PAD * 2 + tallest * NODE_H + (tallest - 1) * GAP_Y;
  return { at, layers, width, height };
}

function drawGraph(job) {
  const { at, layers, width, height } = layout(job.nodes, job.edges);
  const root = svg("svg", {
    viewBox: `0 0 ${width} ${height}`,
    width: String(width),
    class: "graph",
    role: "presentation",
  });
  const defs = svg("defs");
  const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow" }));
  defs.append(marker);
  root.append(defs);
  for (const e of job.edges) {
    const a = at.get(e.from);
    const b = at.get(e.to);
    if (!a || !b) continue;
    const x1 = a.x + NODE_W;
    const y1 = a.y + NODE_H / 2;
    const x2 = b.x - 2;
    const y2 = b.y + NODE_H / 2;
    const mid = (x1 + x2) / 2;
    const path = svg("path", {
      d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`,
      class: "edge",
      "marker-end": "url(#arrow)",
      "data-edge": `${e.from}->${e.to}`,
    });
    root.append(path);
    const ports = [e.output, typeof e.input === "string" ? e.input : null].filter((p) => p);
    if (ports.length) {
      const label = svg("text", { x: String(mid), y: String((y1 + y2) / 2 - 6), class: "edge-label", "text-anchor": "middle" }, ports.join(" → "));
      root.append(label);
    }
  }
  state.nodes.clear();
  for (const n of job.nodes) {
    const p = at.get(n.id);
    const g = svg("g", {
      transform: `translate(${p.x},${p.y})`,
      class: `node ${n.kind}`,
      tabindex: "0",
      role: "button",
      "data-node-id": n.id,
      "data-kind": n.kind,
    });
    g.append(svg("rect", { width: String(NODE_W), height: String(NODE_H), rx: "8", class: "box" }));
    const line = (y, cls, text) => {
      const t = svg("text", { x: "12", y: String(y), class: cls }, text || "");
      g.append(t);
      return t;
    };
    const texts = {
      id: line(22, "node-id", n.id),
      what: line(40, "node-what"),
      rates: line(60, "node-rates"),
      totals: line(78, "node-totals"),
      pressure: line(98, "node-pressure"),
      time: line(114, "node-time"),
    };
    const bar = svg("rect", { x: String(BAR_X), y: "89", width: "0", height: "10", rx: "3", class: "bar" });
    if (n.kind !== "sink") {
      g.append(svg("rect", { x: String(BAR_X), y: "89", width: String(BAR_W), height: "10", rx: "3", class: "bar-track" }));
      g.append(bar);
    }
    const title = svg("title");
    g.append(title);
    g.addEventListener("click", () => select(n.id));
    g.addEventListener("keydown", (ev) => nodeKey(ev, n.id));
    root.append(g);
    state.nodes.set(n.id, { group: g, texts, bar, title, layer: p.layer, index: p.index });
  }
  state.layers = layers;
  const holder = $("graph");
  holder.replaceChildren(root);
}

function nodeKey(ev, id) {
  const here = state.nodes.get(id);
  let target = null;
  if (ev.key === "Enter" || ev.key === " ") {
    ev.preventDefault();
    select(id);
    return;
  }
  if (ev.key === "Escape") {
    select(null);
    return;
  }
  const layer = (l) => state.layers[l] || [];
  if (ev.key === "ArrowDown") target = layer(here.layer)[here.index + 1];
  if (ev.key === "ArrowUp") target = layer(here.layer)[here.index - 1];
  if (ev.key === "ArrowRight" || ev.key === "ArrowLeft") {
    const next = layer(here.layer + (ev.key === "ArrowRight" ? 1 : -1));
    target = next[Math.min(here.index, next.length - 1)];
  }
  if (target) {
    ev.preventDefault();
    state.nodes.get(target).group.focus();
  }
}

function select(id) {
  state.selected = id;
  for (const [nid, n] of state.nodes) n.group.classList.toggle("selected", nid === id);
  renderDetails();
}

function describe(n) {
  if (n.kind === "operator") {
    const p = n.plugin;
    const plugin = p ? `${p.name} ${p.version}` : "plugin loading";
    return `${plugin} · ×${n.instances}`;
  }
  return `${n.kind} · ${n.type}`;
}

function updateGraph(job) {
  for (const n of job.nodes) {
    const view = state.nodes.get(n.id);
    if (!view) continue;
    const r = n.rates;
    const t = view.texts;
    t.what.textContent = describe(n);
    const rin = r ? r.in_per_s : null;
    const rout = r ? r.out_per_s : null;
    t.rates.textContent =
      n.kind === "source" ? `out ${rate(rout)}` : n.kind === "sink" ? `in ${rate(rin)}` : `in ${rate(rin)} · out ${rate(rout)}`;
    t.totals.textContent =
      n.kind === "source"
        ? `${count(n.records_out)} records out`
        : n.kind === "sink"
          ? `${count(n.records_in)} records in`
          : `${count(n.records_in)} in · ${count(n.records_out)} out`;
    const bp = r ? r.backpressure : 0;
    t.pressure.textContent = n.kind === "sink" ? "" : `backpressure ${Math.round(bp * 100)}%`;
    view.bar.setAttribute("width", String(Math.round(BAR_W * bp)));
    view.bar.setAttribute("class", bp > 0.5 ? "bar high" : bp > 0.1 ? "bar mid" : "bar low");
    const timers = n.kind === "operator" ? ` · ${count(n.event_timers + n.processing_timers)} timers` : "";
    t.time.textContent = n.event_time ? `watermark ${shortWatermark(n.watermark_ms)}${timers}` : "";
    const label = `${n.kind} ${n.id}: ${describe(n)}; ${t.rates.textContent}; ${t.totals.textContent}`;
    view.group.setAttribute("aria-label", label);
    view.title.textContent = label;
  }
}

function shortWatermark(w) {
  if (w == null) return "none";
  if (w === "end") return "end";
  const d = new Date(w);
  // With its date: event time is rarely today's.
  return Number.isNaN(d.getTime()) ? String(w) : d.toISOString().slice(0, 19).replace("T", " ");
}

// ---- details, checkpoints, events -----------------------------------------

function row(table, cells, header) {
  const tr = el("tr");
  cells.forEach((c, i) => tr.append(el(i === 0 && header ? "th" : "td", i === 0 && header ? { scope: "row" } : {}, c)));
  table.append(tr);
  return tr;
}

function renderDetails() {
  const box = $("node-details");
  const job = state.job;
  const n = job && state.selected ? job.nodes.find((x) => x.id === state.selected) : null;
  if (!n) {
    // Left as it is when it already says so: nothing to lay out again.
    if (!box.querySelector(".placeholder")) {
      box.replaceChildren(el("p", { class: "muted placeholder" }, "Select a node in the graph."));
      $("node-title").textContent = "Node";
    }
    return;
  }
  $("node-title").textContent = `${n.kind[0].toUpperCase()}${n.kind.slice(1)} ${n.id}`;
  const facts = el("table", { class: "facts" });
  const r = n.rates;
  row(facts, ["Type", n.kind === "operator" ? "operator" : `${n.kind} (${n.type})`], true);
  row(facts, ["Instances", String(n.instances)], true);
  row(facts, ["Records in", `${whole.format(n.records_in)} (${rate(r && r.in_per_s)})`], true);
  row(facts, ["Records out", `${whole.format(n.records_out)} (${rate(r && r.out_per_s)})`], true);
  row(facts, ["Bytes in / out", `${bytes(n.bytes_in)} / ${bytes(n.bytes_out)}`], true);
  if (n.kind !== "sink") row(facts, ["Backpressure", r ? `${(r.backpressure * 100).toFixed(1)}% of the time blocked` : "–"], true);
  const lat = n.batch_latency;
  if (n.kind !== "source" && lat.count > 0) {
    row(facts, [n.kind === "sink" ? "Write time" : "Process call", `${((lat.sum_seconds / lat.count) * 1000).toFixed(3)} ms mean over ${whole.format(lat.count)}`], true);
  }
  if (n.kind === "source") row(facts, ["Skipped (bad timestamp)", whole.format(n.records_skipped)], true);
  if (n.records_bad > 0) {
    const kinds = Object.entries(n.records_bad_by_kind || {})
      .filter(([, count]) => count > 0)
      .map(([kind, count]) => `${whole.format(count)} ${kind}`);
    row(facts, ["Bad records (on_error)", `${whole.format(n.records_bad)}: ${kinds.join(", ")}`], true);
  }
  const rl = n.record_latency;
  if (rl) {
    const text = rl.count > 0
      ? `p50 ${quantile(rl, 0.5)}, p99 ${quantile(rl, 0.99)}, mean ${seconds(rl.sum_seconds / rl.count)} over ${whole.format(rl.count)} records`
      : "no record out yet";
    row(facts, ["Record latency", text], true);
  }
  if (n.kind !== "sink") row(facts, ["Watermark", watermark(n.watermark_ms)], true);
  const parts = [facts];
  if (n.kind === "operator") {
    const p = n.plugin;
    const plugin = el("table", { class: "facts plugin" });
    if (p) {
      row(plugin, ["Plugin", `${p.name} ${p.version}`], true);
      const sha = row(plugin, ["sha256", ""], true);
      sha.lastChild.append(el("code", { class: "sha256" }, p.sha256));
      row(plugin, ["File", `${p.path} (${bytes(p.size)})`], true);
      row(plugin, ["Interface", `${p.flat ? "flat batches" : "record lists"}, state version ${p.state_version}`], true);
    } else {
      row(plugin, ["Plugin", "loading"], true);
    }
    parts.push(el("h3", {}, "Plugin"), plugin);
  }
  if (rl && rl.count > 0) parts.push(el("h3", {}, "Record latency"), latencyHistogram(rl));
  if (n.per_instance && n.kind === "operator") {
    const t = el("table", { class: "instances" });
    const head = el("tr");
    ["Instance", "Watermark", "Event-time timers", "Processing-time timers"].forEach((h) => head.append(el("th", { scope: "col" }, h)));
    t.append(el("thead"));
    t.firstChild.append(head);
    const body = el("tbody");
    n.per_instance.forEach((i, k) => row(body, [String(k), watermark(i.watermark_ms), whole.format(i.event_timers), whole.format(i.processing_timers)], true));
    t.append(body);
    parts.push(el("h3", {}, "Instances"), t);
  }
  box.replaceChildren(...parts);
}

// A checkpoint's row never changes once written (the journal records a
// checkpoint when it completed or failed), so a render adds the new rows,
// drops the old ones and leaves the others where they are. A row is known
// by id, start and outcome: a restart may take an id again.
function renderCheckpoints(doc) {
  const body = $("checkpoints").tBodies[0];
  const shown = new Map();
  for (const tr of body.rows) shown.set(tr.dataset.key, tr);
  const rows = doc.history.slice(0, CHECKPOINT_ROWS).map((c) => {
    const key = `${c.id} ${c.started_at_ms} ${c.error ? "failed" : "completed"}`;
    return shown.get(key) || checkpointRow(c, key);
  });
  if (rows.length === 0) {
    let tr = shown.get("empty");
    if (!tr) {
      tr = el("tr", { class: "empty", "data-key": "empty" });
      tr.append(el("td", { colspan: "8" }, "No checkpoint yet."));
    }
    rows.push(tr);
  }
  const keep = new Set(rows);
  for (const tr of [...body.rows]) if (!keep.has(tr)) tr.remove();
  rows.forEach((tr, i) => {
    if (body.rows[i] !== tr) body.insertBefore(tr, body.rows[i] || null);
  });
}

function checkpointRow(c, key) {
  const tr = el("tr", { "data-checkpoint": String(c.id), "data-key": key, class: c.error ? "failed" : "completed" });
  const outcome = c.error ? `failed: ${c.error}` : c.is_final ? "completed (final)" : c.unaligned ? "completed (unaligned)" : "completed";
  const cells = [
    String(c.id),
    outcome,
    clock(c.started_at_ms),
    `${c.duration_ms} ms`,
    `${c.alignment_ms} ms`,
    `${c.pause_ms} ms`,
    c.error ? "–" : bytes(c.bytes_written),
    c.unaligned ? bytes(c.inflight_bytes) : "–",
  ];
  cells.forEach((text, i) => tr.append(el(i === 0 ? "th" : "td", i === 0 ? { scope: "row" } : {}, text)));
  return tr;
}

function renderEvents(doc) {
  const list = $("events");
  const items = doc.events.map((e) => {
    const li = el("li", { class: e.error ? "event error" : "event", "data-kind": e.kind });
    li.append(el("time", { datetime: new Date(e.at_ms).toISOString() }, clock(e.at_ms)), " ");
    li.append(el("span", { class: "kind" }, e.kind), " ");
    li.append(el("span", { class: "message" }, e.message));
    return li;
  });
  if (items.length === 0) items.push(el("li", { class: "empty muted" }, "Nothing happened yet."));
  list.replaceChildren(...items);
}

function renderJob(job) {
  state.job = job;
  document.title = `${job.job} · Weir`;
  $("job-name").textContent = job.job;
  $("uptime").textContent = duration(job.uptime_ms);
  const c = job.checkpoints;
  $("checkpoint-count").textContent = `${whole.format(c.completed)}${c.last_id ? ` (last ${c.last_id})` : ""}`;
  $("checkpoint-failed").textContent = whole.format(c.failed);
  $("checkpoint-failed").classList.toggle("bad", c.failed > 0);
  $("restarts").textContent = whole.format(c.restarts);
  $("restarts").classList.toggle("bad", c.restarts > 0);
  const cp = job.checkpoint;
  $("checkpoint-mode").textContent = cp.interval_ms ? `${cp.mode}, every ${cp.interval_ms} ms` : "off";
  const key = JSON.stringify([job.nodes.map((n) => n.id), job.edges]);
  if (key !== state.graphKey) {
    state.graphKey = key;
    drawGraph(job);
    setUpActions(job);
  }
  updateGraph(job);
  renderDetails();
}

// ---- actions --------------------------------------------------------------

function setUpActions(job) {
  $("actions-on").hidden = !job.actions;
  $("actions-off").hidden = job.actions;
  const select = $("swap-operator");
  select.replaceChildren(...job.nodes.filter((n) => n.kind === "operator").map((n) => el("option", { value: n.id }, n.id)));
  showShadow();
}

// The last `weir shadow` report of the operator the swap form names.
async function showShadow() {
  const out = $("shadow-report");
  const op = $("swap-operator").value;
  if (!op) return;
  let doc;
  try {
    const res = await fetch("api/shadow");
    doc = await res.json();
  } catch (_) {
    return; // the stream's status says when the dashboard is unreachable
  }
  const r = doc.operators ? doc.operators[op] : null;
  out.className = "muted";
  if (!r) {
    out.textContent = `No shadow run of ${op} yet: weir shadow JOB --operator ${op} --with NEW.wasm tries a plugin on its recorded input first.`;
    return;
  }
  const plugin = `${r.v2.name} ${r.v2.version} (${r.v2.path})`;
  const range = `${r.epochs} recorded epoch${r.epochs === 1 ? "" : "s"} to checkpoint ${r.to_checkpoint}`;
  const total = r.same + r.differing;
  let text = `Last shadow run: ${plugin} on ${range}: ${r.differing} of ${total} records differ, ${r.state_differing} state keys differ, ${r.errors} errors (${r.traps} traps).`;
  if (!r.v1_reproduced) text += " The running plugin did not reproduce its recording.";
  out.textContent = text;
  out.className = r.traps > 0 || r.errors > 0 ? "error" : "muted";
}

$("swap-operator").addEventListener("change", showShadow);
setInterval(() => { if (!$("actions-on").hidden) showShadow(); }, 5000);

async function act(path, body, button, busy) {
  const result = $("action-result");
  button.disabled = true;
  result.className = "pending";
  result.textContent = busy;
  try {
    const res = await fetch(path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    let doc = {};
    try {
      doc = await res.json();
    } catch (_) {
      doc = { error: `the dashboard answered ${res.status} without JSON` };
    }
    if (res.ok && doc.ok) {
      result.className = "ok";
      result.textContent = doc.message;
    } else {
      result.className = "error";
      result.textContent = doc.error || `failed with status ${res.status}`;
    }
  } catch (e) {
    result.className = "error";
    result.textContent = `the dashboard is unreachable: ${e.message}`;
  } finally {
    button.disabled = false;
  }
}

$("savepoint-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const out = $("savepoint-out").value.trim();
  const body = { stop: $("savepoint-stop").checked, out: out || null };
  act("api/savepoint", body, $("savepoint-button"), "Taking a savepoint…");
});

$("swap-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const body = { operator: $("swap-operator").value, plugin: $("swap-plugin").value.trim() };
  act("api/swap", body, $("swap-button"), `Swapping ${body.operator}… (at the next checkpoint)`);
});

// ---- the live stream ---------------------------------------------------------

function setStatus(cls, text) {
  const s = $("status");
  s.className = `status ${cls}`;
  s.textContent = text;
}

function connect() {
  const source = new EventSource("api/stream");
  source.addEventListener("open", () => {
    state.failures = 0;
    setStatus("live", "running");
  });
  const handle = (render) => (ev) => {
    try {
      render(JSON.parse(ev.data));
    } catch (e) {
      console.error("dashboard:", e);
    }
  };
  source.addEventListener("job", handle(renderJob));
  source.addEventListener("checkpoints", handle(renderCheckpoints));
  source.addEventListener("events", handle(renderEvents));
  source.addEventListener("error", () => {
    state.failures += 1;
    setStatus("lost", state.failures > 3 ? "unreachable: the job ended or stopped" : "reconnecting");
  });
}

connect();
