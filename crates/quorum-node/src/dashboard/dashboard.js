// The node dashboard: polls the cluster and review list, renders one review from its event
// backlog, then follows it live over server-sent events. Everything from a review (titles,
// evidence, file names) is inserted as text, never as HTML.
"use strict";

const params = new URLSearchParams(location.search);
const token = params.get("token") || sessionStorage.getItem("quorum-token") || "";
if (token) sessionStorage.setItem("quorum-token", token);
const ROLES = ["scout", "planner", "specialists", "verifier", "synthesizer"];
const STAGE_OF = { scout: "scout", planner: "planner", verifier: "verifier", synthesizer: "synthesizer" };

let selected = params.get("flow") || null;
let view = null;
let source = null;

function q(path) {
  const sep = path.includes("?") ? "&" : "?";
  return token ? path + sep + "token=" + encodeURIComponent(token) : path;
}

async function getJson(path) {
  const r = await fetch(q(path), { headers: token ? { Authorization: "Bearer " + token } : {} });
  if (!r.ok) throw new Error(path + ": " + r.status);
  return r.json();
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k === "onclick") e.onclick = v; else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}

function setConn(text) { document.getElementById("conn").textContent = text; }

async function refreshCluster() {
  try {
    const c = await getJson("/api/cluster");
    const body = document.querySelector("#cluster tbody");
    body.replaceChildren(...c.nodes.map(n => el("tr", { "data-node": n.name },
      el("td", {}, n.name), el("td", { class: "state " + n.state }, n.state),
      el("td", {}, n.models.join(", ")), el("td", {}, n.capacity),
      el("td", {}, n.in_flight + " / " + n.capacity),
      el("td", {}, n.conducting.length ? n.conducting.join(", ") : "–"))));
    setConn("live");
  } catch (e) { setConn("cannot reach the node: " + e.message); }
}

async function refreshReviews() {
  try {
    const r = await getJson("/api/reviews");
    if (!selected && r.reviews.length) {
      const running = r.reviews.find(x => x.status === "running");
      select((running || r.reviews[0]).flow_id);
    }
    const body = document.querySelector("#reviews tbody");
    body.replaceChildren(...r.reviews.slice(0, 50).map(x => el("tr", {
      class: "clickable" + (x.flow_id === selected ? " selected" : ""), onclick: () => select(x.flow_id),
    }, el("td", {}, x.flow_id), el("td", {}, x.flow), el("td", {}, x.target),
       el("td", { class: "status " + x.status }, x.status), el("td", {}, x.findings), el("td", {}, x.started_at))));
  } catch (e) { setConn("cannot list reviews: " + e.message); }
}

function newView(id) {
  return { id, status: "running", stage: "", stages: {}, tasks: new Map(), findings: new Map(), timeline: [], usage: null, last: 0 };
}

function task(v, id) {
  if (!v.tasks.has(id)) v.tasks.set(id, { id, persona: "", state: "pending", node: "", model: "", attempts: 0, tokens_in: 0, tokens_out: 0, error: "", findings: 0 });
  return v.tasks.get(id);
}

function apply(v, ev) {
  if (ev.seq <= v.last) return;
  v.last = ev.seq;
  const d = ev.data || {};
  let line = ev.kind;
  switch (ev.kind) {
    case "stage": v.stage = d.stage; v.stages[d.stage] = true; line = "stage " + d.stage; break;
    case "planned": line = "planned " + d.tasks + " tasks (" + d.rejected + " rejected)"; break;
    case "task_started": {
      const t = task(v, d.task);
      t.persona = d.persona; t.state = "running"; t.attempts = d.attempt;
      if (d.node) t.node = d.node; if (d.model) t.model = d.model;
      line = "started " + d.task + " attempt " + d.attempt + (d.node ? " on " + d.node : "") + (d.model ? " (" + d.model + ")" : "");
      break;
    }
    case "task_finished": {
      const t = task(v, d.task);
      t.state = d.ok ? "ok" : "failed"; t.error = d.error || ""; t.findings = d.findings || 0;
      if (d.model) t.model = d.model;
      t.tokens_in += d.tokens_in || 0; t.tokens_out += d.tokens_out || 0;
      line = (d.ok ? "finished " : "failed ") + d.task + (d.ok ? (STAGE_OF[d.task] ? "" : " (" + (d.findings || 0) + " findings)") : ": " + (d.error_class || d.error || ""));
      break;
    }
    case "verified": line = "verified " + d.done + "/" + d.total; break;
    // The control plane lost its majority: the review waits (and says for whom), then goes on.
    case "waiting":
      v.waiting = d.reason || "";
      line = d.reason ? d.reason : "a majority of voters is back; the review goes on";
      break;
    case "finding": v.findings.set(d.id, d); line = "finding " + d.id + " " + d.severity + ": " + d.title; break;
    case "usage": v.usage = d; line = null; break;
    case "progress_finished": line = null; break;
    case "finished": v.status = d.status || "finished"; line = "finished: " + v.status + (d.error ? " (" + d.error + ")" : ""); break;
  }
  if (line) v.timeline.push({ seq: ev.seq, at: new Date(d.at_ms || Date.now()).toLocaleTimeString(), line });
}

function fromReport(v, r) {
  // A review from before this node restarted: its stored report fills in what the events cannot.
  v.status = r.status;
  for (const t of r.tasks || []) {
    const x = task(v, t.id);
    Object.assign(x, { persona: t.persona, state: t.status === "completed" ? "ok" : t.status, node: t.node, model: t.model,
      attempts: t.attempts, tokens_in: t.tokens_in, tokens_out: t.tokens_out, error: t.error || "" });
  }
  for (const f of r.findings || []) {
    if (!v.findings.has(f.id)) v.findings.set(f.id, { id: f.id, title: f.title, severity: String(f.severity).toLowerCase(),
      file: f.file, line_start: f.line_start, line_end: f.line_end, verdict: String(f.verdict).toLowerCase(), evidence: f.evidence });
  }
  if (r.usage) v.usage = { llm_calls: r.usage.llm_calls, tokens_in: r.usage.tokens_in, tokens_out: r.usage.tokens_out };
}

function render() {
  const v = view;
  if (!v) return;
  document.getElementById("review").hidden = false;
  document.getElementById("review-id").textContent = v.id;
  const st = document.getElementById("review-status");
  st.textContent = v.status; st.className = "status " + v.status;
  const waiting = document.getElementById("review-waiting");
  waiting.hidden = !v.waiting || v.status !== "running"; waiting.textContent = v.waiting || "";
  document.getElementById("review-usage").textContent = v.usage
    ? "model calls " + v.usage.llm_calls + " · tokens " + v.usage.tokens_in + " in / " + v.usage.tokens_out + " out" : "";
  const cols = ROLES.map(role => {
    const tasks = [...v.tasks.values()].filter(t => (STAGE_OF[t.id] || "specialists") === role);
    return el("div", { class: "stage" + (v.stage === role ? " current" : ""), "data-stage": role },
      el("h4", {}, role),
      ...tasks.map(t => el("div", { class: "task " + t.state, "data-task": t.id },
        el("div", {}, el("b", {}, t.id), t.persona && t.persona !== t.id ? " · " + t.persona : ""),
        el("div", { class: "meta" }, t.state + " · attempt " + t.attempts + (t.node ? " · node " + t.node : "") + (t.model ? " · " + t.model : "")),
        el("div", { class: "meta" }, "tokens " + t.tokens_in + " in / " + t.tokens_out + " out" + (t.findings ? " · " + t.findings + " findings" : "")),
        t.error ? el("div", { class: "meta error" }, t.error) : "")));
  });
  const dag = [];
  cols.forEach((c, i) => { if (i) dag.push(el("span", { class: "arrow" }, "→")); dag.push(c); });
  document.getElementById("dag").replaceChildren(...dag);
  document.getElementById("findings").replaceChildren(...[...v.findings.values()].map(f => el("li", { "data-finding": f.id },
    el("span", { class: "sev" }, f.id + " " + f.severity), el("span", { class: "title" }, f.title), " ",
    el("span", { class: "loc" }, (f.file || "") + (f.line_start ? ":" + f.line_start + (f.line_end && f.line_end !== f.line_start ? "-" + f.line_end : "") : "")),
    f.verdict ? el("span", { class: "meta" }, " · " + f.verdict) : "",
    f.evidence ? el("pre", { class: "evidence" }, f.evidence) : "")));
  document.getElementById("timeline").replaceChildren(...v.timeline.map(t => el("li", {}, "#" + t.seq + " " + t.at + " " + t.line)));
}

async function select(id) {
  if (source) { source.close(); source = null; }
  selected = id;
  const v = view = newView(id);
  try {
    const b = await getJson("/api/reviews/" + encodeURIComponent(id) + "/events");
    for (const ev of b.events) apply(v, ev);
  } catch (e) { /* not in this node's memory: a review from before a restart */ }
  if (v.status !== "running" || v.last === 0) {
    try { fromReport(v, await getJson("/api/reviews/" + encodeURIComponent(id) + "/report")); } catch (e) { }
  }
  render();
  if (v.status === "running" && view === v) follow(v);
}

// When the open stream last said anything, and how often its node promised to: a stream
// quiet for three heartbeats is from a node gone silent (frozen, unplugged), which the
// browser's EventSource alone would wait on for as long as it stays away.
let heard = 0, heartbeatMs = 2000;

function lost(v, why) {
  if (source) { source.close(); source = null; }
  setConn(why);
  setTimeout(() => { if (view === v) select(v.id); }, 2000);
}

function follow(v) {
  source = new EventSource(q("/api/reviews/" + encodeURIComponent(v.id) + "/stream?after=" + v.last));
  const mine = source;
  heard = Date.now();
  source.addEventListener("heartbeat", m => {
    heard = Date.now();
    try { heartbeatMs = JSON.parse(m.data).every_ms || heartbeatMs; } catch (e) { }
    setConn("live");
  });
  const watchdog = setInterval(() => {
    if (source !== mine) { clearInterval(watchdog); return; }
    if (Date.now() - heard > 3 * heartbeatMs) {
      clearInterval(watchdog);
      lost(v, "connection lost, retrying");
    }
  }, 1000);
  source.addEventListener("review", m => {
    heard = Date.now();
    apply(v, JSON.parse(m.data));
    if (v.status !== "running") {
      source.close(); source = null;
      getJson("/api/reviews/" + encodeURIComponent(v.id) + "/report").then(r => { fromReport(v, r); render(); }).catch(() => {});
    }
    render();
  });
  // The node went away (restart): reselect after a pause, picking up the resumed review.
  source.onerror = () => {
    if (source !== mine) return;
    clearInterval(watchdog);
    lost(v, "lost the event stream; retrying");
  };
}

refreshCluster();
if (selected) select(selected);
refreshReviews();
setInterval(refreshCluster, 2000);
setInterval(refreshReviews, 3000);
