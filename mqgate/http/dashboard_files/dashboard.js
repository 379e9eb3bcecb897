// mqgate dashboard: reads the admin, EventBridge and connector APIs of the same mqgate serve (same origin, so the
// browser sends the credentials it signed in with) and draws pages from them. No framework and no CDN: everything
// it needs is this file, the page and its stylesheet, served by mqgate. Data is put in the page as text only.
"use strict";

const POLL_MS = 2000;
const HISTORY = 150; // samples kept for the charts: 5 minutes at one every 2 s
const history = { rate: [], connections: [] };
let lastOverview = null;
let timer = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "onclick") node.addEventListener("click", value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function table(columns, rows, numeric = []) {
  if (rows.length === 0) return el("p", { class: "empty" }, "none");
  const head = el("tr", {}, ...columns.map((c) => el("th", {}, c)));
  const body = rows.map((row) =>
    el("tr", {}, ...row.map((cell, i) =>
      el("td", numeric.includes(columns[i]) ? { class: "num" } : {}, cell))));
  return el("table", {}, el("thead", {}, head), el("tbody", {}, ...body));
}

function show(id, node) {
  const target = document.getElementById(id);
  target.replaceChildren(node);
}

function status(text, error = false) {
  const node = document.getElementById("status");
  node.textContent = text;
  node.className = error ? "error" : "";
}

async function api(path) {
  // From the origin, not the page's URL: opened as http://user:password@host/dashboard, the page's URL holds
  // credentials, and fetch refuses a URL resolved against it. The browser still sends the credentials it signed in
  // with: the request is same-origin.
  const response = await fetch(new URL(path, location.origin), { headers: { Accept: "application/json" } });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}: ${body.message || response.statusText}`);
  return body;
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function link(text, onclick) {
  return el("button", { class: "link", type: "button", onclick }, text);
}

// --- charts -----------------------------------------------------------------------------------------------

function drawChart(id, points) {
  const svg = document.getElementById(id);
  const ns = "http://www.w3.org/2000/svg";
  const width = 600, height = 160, pad = 14;
  const max = Math.max(1, ...points);
  const step = (width - 2 * pad) / Math.max(1, HISTORY - 1);
  const offset = HISTORY - points.length;
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", points.map((v, i) =>
    `${(pad + (offset + i) * step).toFixed(1)},${(height - pad - (v / max) * (height - 2 * pad)).toFixed(1)}`).join(" "));
  const top = document.createElementNS(ns, "text");
  top.setAttribute("x", "2"); top.setAttribute("y", "10");
  top.textContent = `max ${max.toFixed(max < 10 ? 1 : 0)}`;
  const now = document.createElementNS(ns, "text");
  now.setAttribute("x", String(width - 80)); now.setAttribute("y", "10");
  now.textContent = points.length ? `now ${points[points.length - 1].toFixed(1)}` : "";
  svg.replaceChildren(line, top, now);
}

// --- pages ------------------------------------------------------------------------------------------------

async function overview() {
  const o = await api("/admin/overview");
  if (lastOverview !== null) {
    const seconds = Math.max(0.001, (o.now_ms - lastOverview.now_ms) / 1000);
    history.rate.push(Math.max(0, (o.messages_stored - lastOverview.messages_stored) / seconds));
  }
  history.connections.push(o.mqtt_connected);
  for (const series of Object.values(history)) while (series.length > HISTORY) series.shift();
  lastOverview = o;
  const card = (label, value) => el("div", { class: "card" }, el("div", { class: "value" }, value), el("div", { class: "label" }, label));
  const uptime = Math.round((o.now_ms - o.started_ms) / 1000);
  show("overview-cards", el("div", { class: "cards" },
    card("messages stored", o.messages_stored),
    card("topics", o.topics),
    card("consumer groups", o.groups),
    card("MQTT connections", o.mqtt_connected),
    card("MQTT sessions", o.mqtt_sessions),
    card("commit log", bytes(o.commit_log_bytes)),
    card("up for", `${uptime} s`)));
  drawChart("rate-chart", history.rate);
  drawChart("connections-chart", history.connections);
  // The store's report walks its directories: every 5th sample is enough for a disk gauge.
  if (history.connections.length % 5 !== 1) return;
  const store = await api("/admin/store");
  const fs = store.disk.filesystem;
  show("disk", table(["store", "on disk", "file system used", "flush mode", "unflushed"],
    [[store.store_dir, bytes(store.disk.store_bytes), `${(fs.used_ratio * 100).toFixed(1)}% of ${bytes(fs.total_bytes)}`,
      store.flush_mode, bytes(store.unflushed_bytes)]]));
}

async function topics() {
  const answer = await api("/admin/topics");
  const rows = answer.topics.map((t) => [link(t.topic, () => topicDetail(t.topic)), t.kind, t.read_queues,
    t.write_queues, t.perm, t.message_type, t.messages]);
  show("topics-table", table(["topic", "kind", "read queues", "write queues", "perm", "type", "messages"], rows,
    ["read queues", "write queues", "messages"]));
}

async function topicDetail(name) {
  const t = await api(`/admin/topics/${encodeURIComponent(name)}`);
  const rows = t.queues.map((q) => [q.queue_id, q.min_offset, q.max_offset, q.messages, q.last_update || ""]);
  show("topic-detail", el("div", {}, el("h3", {}, `Topic ${t.topic}`),
    table(["queue", "min offset", "max offset", "messages", "last update"], rows,
      ["queue", "min offset", "max offset", "messages"]),
    el("p", {}, `Groups consuming it: ${t.groups.join(", ") || "none"}`)));
}

async function groups() {
  const answer = await api("/admin/groups");
  const rows = answer.groups.map((g) => [link(g.group, () => groupDetail(g.group)), g.members, g.topics.join(", "), g.lag]);
  show("groups-table", table(["group", "members", "topics", "lag"], rows, ["members", "lag"]));
}

async function groupDetail(name) {
  const p = await api(`/admin/groups/${encodeURIComponent(name)}/progress`);
  const rows = p.queues.map((q) => [q.topic, q.queue_id, q.broker_offset, q.consumer_offset, q.lag, q.last_consume || ""]);
  show("group-detail", el("div", {}, el("h3", {}, `Group ${p.group}: lag ${p.lag}`),
    table(["topic", "queue", "broker offset", "consumer offset", "lag", "last consume time"], rows,
      ["queue", "broker offset", "consumer offset", "lag"])));
}

async function clients() {
  const answer = await api("/admin/clients");
  const rows = answer.mqtt.map((s) => [s.client_id, s.connected ? `connected from ${s.peer}` : `away since ${s.disconnected_at}`,
    s.subscriptions.map((sub) => `${sub.share_group ? `$share/${sub.share_group}/` : ""}${sub.topic_filter} (QoS ${sub.qos})`).join(", "),
    s.inflight, s.queued, s.node]);
  show("clients-table", answer.mqtt_enabled
    ? table(["client id", "state", "subscriptions", "inflight", "queued", "node"], rows, ["inflight", "queued"])
    : el("p", { class: "empty" }, "the MQTT gateway is off"));
  const cluster = answer.mqtt_enabled ? await api("/admin/mqtt/cluster") : null;
  show("clients-cluster", cluster && cluster.clustered
    ? el("div", {}, el("h3", {}, `On the cluster: this node is ${cluster.group} of ${cluster.groups.join(", ")}`),
      table(["persistent session", "held by"], Object.entries(cluster.sessions)),
      table(["filter", "shared group", "used on"], cluster.filters.map((f) => [f.topic_filter, f.share_group || "",
        f.groups.join(", ")])))
    : el("span"));
  show("consumers-table", table(["group", "client id", "type", "model", "topics"],
    answer.consumers.map((m) => [m.group, m.client_id, m.consume_type, m.message_model, m.topics.join(", ")])));
}

async function rules() {
  const answer = await api("/rules");
  // A refused file is not running, whatever it says: shown first, with its file:line:column and reason.
  show("rules-refused", answer.refused.length === 0 ? el("span") : el("div", { class: "refused" },
    el("h3", {}, `Refused rule files (${answer.refused.length}): their rules in force, if any, are from before`),
    table(["file", "rules it names", "error"], answer.refused.map((r) => [r.file, r.rules.join(", "), r.error]))));
  const rows = [];
  for (const rule of answer.rules) {
    for (const target of rule.targets) {
      // On a cluster `node` names the broker group whose node runs the target (its counts are there).
      rows.push([rule.bus, rule.name, rule.enabled ? "yes" : "no", target.id, target.type, target.node ?? "",
        target.state, target.matched ?? "", target.delivered ?? "", target.retries ?? "", target.dead_lettered ?? "",
        target.last_error || ""]);
    }
  }
  show("rules-table", table(["bus", "rule", "enabled", "target", "type", "node", "state", "matched", "delivered",
    "retries", "dead letters", "last error"], rows, ["matched", "delivered", "retries", "dead letters"]));
}

async function connectors() {
  const answer = await api("/connectors?expand=status&expand=info");
  const rows = Object.entries(answer).sort().map(([name, c]) => [name, c.info.config["connector.class"] || "",
    c.status.connector.state, c.status.tasks.map((t) => `${t.id}: ${t.state} on ${t.worker_id}`).join(", ")]);
  show("connectors-table", table(["connector", "plugin", "state", "tasks"], rows));
}

async function search(event) {
  event.preventDefault();
  const form = new FormData(event.target);
  const query = new URLSearchParams({ topic: form.get("topic") });
  const value = form.get("value").trim();
  if (form.get("by") === "key") query.set("key", value);
  else if (form.get("by") === "id") query.set("id", value);
  query.set("from", form.get("from").trim() || "0");
  if (form.get("to").trim()) query.set("to", form.get("to").trim());
  try {
    const answer = await api(`/admin/messages?${query}`);
    const rows = answer.messages.map((m) => [m.store_time, link(m.offset_msg_id, () => messageDetail(m.offset_msg_id)),
      m.msg_id || "", m.queue_id, m.queue_offset, m.tags || "", m.keys.join(" "), m.body]);
    show("search-results", el("div", {}, el("p", {}, `${answer.messages.length} message(s)`),
      table(["store time", "offset msg id", "msg id", "queue", "offset", "tags", "keys", "body"], rows, ["queue", "offset"])));
    status("");
  } catch (error) {
    show("search-results", el("p", { class: "empty" }, error.message));
  }
}

async function messageDetail(id) {
  const answer = await api(`/admin/messages/${encodeURIComponent(id)}`);
  const m = answer.message;
  show("message-detail", el("div", {}, el("h3", {}, `Message ${m.offset_msg_id}`),
    table(["property", "value"], Object.entries(m.properties).sort()),
    el("pre", {}, m.body),
    table(["group", "state", "committed offset"], answer.tracks.map((t) => [t.group, t.state || t.error, t.committed_offset ?? ""]))));
}

const PAGES = { overview, topics, groups, clients, rules, connectors, messages: async () => {} };

async function refresh() {
  const page = (location.hash || "#overview").slice(1);
  const load = PAGES[page] || overview;
  try {
    await load();
    status(`updated ${new Date().toLocaleTimeString()}`);
  } catch (error) {
    status(error.message, true);
  }
}

function route() {
  const page = (location.hash || "#overview").slice(1);
  for (const section of document.querySelectorAll(".page")) section.classList.toggle("active", section.id === page);
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.getAttribute("href") === `#${page}`);
  clearInterval(timer);
  refresh();
  if (page !== "messages") timer = setInterval(refresh, POLL_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("search").addEventListener("submit", search);
  window.addEventListener("hashchange", route);
  // The overview's chart needs samples even while another page is shown.
  setInterval(() => { if ((location.hash || "#overview") !== "#overview") overview().catch(() => {}); }, POLL_MS);
  route();
});
