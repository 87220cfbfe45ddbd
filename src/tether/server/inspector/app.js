// The tether inspector: threads of a namespace, a thread's causal graph, its
// conversation, variables, memory, tool state and runs (task state, flow progress,
// executor tree), the namespace's runs by status, and "clear state" -- all read and
// changed through the HTTP API with the token typed in above.

import { Api, ApiError } from "./api.js";
import { badge, bytes, empty, fill, h, isErased, shortId, when } from "./dom.js";
import { drawGraph, summarize } from "./graph.js";
import { RUN_FILTERS, flowView, runIndexTable, statusHistory } from "./tasks.js";
import {
  conversationView,
  executionTree,
  keyLabel,
  memoryValue,
  metadataChips,
  nodeFields,
  payloadBlock,
  summaryBlock,
  resourceTable,
  runsTable,
  scopeSection,
  statusBadge,
  variableValue,
  versionList,
} from "./views.js";

const GRAPH_MAX = 400; // newest nodes drawn; older ones are a page away in History
const TOOL_STATE = "semantic:tool_state:"; // tool state's resource keys: <tool>/<key>
const TABS = ["graph", "conversation", "variables", "memory", "tools", "runs"];
const RUNS_PAGE = 50;

const api = new Api();
const $ = (sel) => document.querySelector(sel);

const state = {
  whoami: null,
  ns: "default",
  threads: [],
  thread: null,
  describe: null,
  nodes: [],
  usage: null, // the open thread's /stats: nodes, stored bytes, last activity
  byId: new Map(),
  total: 0,
  tab: "graph",
  selected: null,
  llm: "agent",
  graph: null,
  view: "thread", // or "runs": the namespace's runs
  run: null, // the run open in a thread's Runs tab
  runFilter: { status: "", user: "" },
  runPage: null, // {runs, next_after, counts} of the runs view
  bookkeeping: false, // graph tab: show framework savers' bookkeeping nodes
};

// ------------------------------------------------------------------ helpers

function can(grant) {
  const w = state.whoami;
  if (!w) return false;
  const g = w.grants;
  return g.includes("*") || g.includes(grant) || g.includes(grant.split(".")[0] + ".*");
}

function toast(text, kind = "info") {
  const el = h("div", { class: ["toast", `toast-${kind}`], role: "status" }, text);
  $("#toasts").append(el);
  setTimeout(() => el.remove(), kind === "bad" ? 9000 : 4000);
}

function fail(err) {
  if (err instanceof ApiError) {
    toast(`${err.status} ${err.code}: ${err.message}`, "bad");
    if (err.status === 401) disconnect("The token was refused: enter a valid one.");
  } else {
    toast(String(err), "bad");
    console.error(err);
  }
}

/** Show an error in place of what `el` was loading, and tell the person. */
function failIn(el, err) {
  fill(el, empty(err.message));
  fail(err);
}

function confirmDialog(title, text, action) {
  const dlg = $("#confirm");
  fill($("#confirm-title"), title);
  fill($("#confirm-text"), text);
  fill($("#confirm-ok"), action);
  dlg.returnValue = "";
  dlg.showModal();
  return new Promise((resolve) => {
    dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), { once: true });
  });
}

function graphReport() {
  const d = state.describe;
  return d ? d.stores.find((r) => r.name === "graph") : null;
}

function storeReport(name) {
  const d = state.describe;
  return d ? d.stores.find((r) => r.name === name) : null;
}

function threadUsers() {
  const users = new Set();
  for (const n of state.nodes) {
    const u = n.kind === "goal" && n.payload && n.payload.metadata && n.payload.metadata.user;
    if (typeof u === "string" && u) users.add(u);
  }
  return [...users].sort();
}

function threadLlms() {
  const llms = new Set();
  for (const n of state.nodes) {
    const l = n.payload && n.payload.llm;
    if (typeof l === "string" && l) llms.add(l);
  }
  if (!llms.size) llms.add("agent");
  return [...llms].sort();
}

function setHash() {
  const p = new URLSearchParams();
  p.set("ns", state.ns);
  if (state.view === "runs") {
    p.set("view", "runs");
    if (state.runFilter.status) p.set("status", state.runFilter.status);
    if (state.runFilter.user) p.set("user", state.runFilter.user);
  } else {
    if (state.thread) p.set("thread", state.thread);
    if (state.tab !== "graph") p.set("tab", state.tab);
    if (state.tab === "runs" && state.run) p.set("run", state.run);
  }
  history.replaceState(null, "", `#${p.toString()}`);
}

// ------------------------------------------------------------------ connection

async function connect() {
  const status = $("#conn-status");
  try {
    state.whoami = await api.get("/v1/whoami");
  } catch (err) {
    state.whoami = null;
    fill(status, badge(err instanceof ApiError ? `${err.status} ${err.code}` : "offline", "bad"));
    if (err instanceof ApiError && err.status === 401) disconnect("The token was refused.");
    return;
  }
  const w = state.whoami;
  fill(
    status,
    h(
      "span",
      { class: "whoami", title: `grants: ${w.grants.join(", ")}\nnamespaces: ${w.namespaces.join(", ")}` },
      badge("connected", "ok"),
      " token ",
      h("b", {}, w.name),
    ),
  );
  $("#login").classList.add("connected");
  await loadThreads();
}

function disconnect(message) {
  api.setToken("");
  state.whoami = null;
  $("#login").classList.remove("connected");
  fill($("#conn-status"), message ? badge("not connected", "bad") : "");
  fill($("#threads"), empty("Connect with a token to list threads."));
  fill($("#main"), welcome(message));
}

function welcome(message) {
  return h(
    "div",
    { class: "welcome" },
    h("h2", {}, "tether inspector"),
    h(
      "p",
      {},
      "Durable agent state, one causal graph per scope. Enter a bearer token above (for a dev ",
      "server, the value of TETHER_TOKEN) to browse the threads of a namespace.",
    ),
    message ? h("p", { class: "error" }, message) : null,
  );
}

// ------------------------------------------------------------------ threads

async function loadThreads() {
  const list = $("#threads");
  if (!can("state.describe")) {
    fill(list, empty("This token cannot describe state (grant state.describe)."));
    return;
  }
  fill(list, empty("Loading…"));
  try {
    const page = await api.get(api.ns(state.ns, "/threads"), { limit: 500 });
    state.threads = page.threads;
  } catch (err) {
    failIn(list, err);
    return;
  }
  renderThreads();
  refreshWaiting();
  if (state.view === "runs") await openRuns();
  else if (state.thread) await openThread(state.thread, { keepTab: true });
  else fill($("#main"), empty("Pick a thread on the left, or Runs above it."));
}

async function refreshThreadList() {
  try {
    state.threads = (await api.get(api.ns(state.ns, "/threads"), { limit: 500 })).threads;
    renderThreads();
  } catch (err) {
    fail(err);
  }
  refreshWaiting();
}

/** The sidebar's count of runs waiting for a human (one read of the run index). */
async function refreshWaiting() {
  const slot = $("#waiting-count");
  try {
    const page = await api.get(api.ns(state.ns, "/runs"), { status: "suspended", limit: 1 });
    const n = page.counts.suspended || 0;
    fill(slot, n ? badge(`${n} waiting`, "warn") : "");
  } catch {
    fill(slot, ""); // a token without state.describe: the runs view says why
  }
}

function renderThreads() {
  const filter = $("#thread-filter").value.trim().toLowerCase();
  const rows = state.threads.filter((t) => !filter || t.thread.toLowerCase().includes(filter));
  fill($("#thread-count"), `${state.threads.length}`);
  if (!rows.length) {
    fill($("#threads"), empty(state.threads.length ? "No thread matches." : "No threads in this namespace."));
    return;
  }
  fill(
    $("#threads"),
    h(
      "ul",
      { class: "thread-list" },
      rows.map((t) =>
        h(
          "li",
          {},
          h(
            "button",
            {
              class: ["thread-item", t.thread === state.thread && "active"],
              dataset: { thread: t.thread },
              onclick: () => openThread(t.thread),
              title: `${t.scope} · ${t.size_bytes} bytes stored` + (t.last_activity ? ` · last activity ${t.last_activity}` : ""),
            },
            h("span", { class: "thread-name" }, t.thread),
            h(
              "span",
              { class: "thread-meta" },
              `${t.nodes} nodes · ${t.runs} run${t.runs === 1 ? "" : "s"} · ${bytes(t.size_bytes)}`,
            ),
          ),
        ),
      ),
    ),
  );
}

// ------------------------------------------------------------------ a thread

async function openThread(thread, { keepTab = false, tab = null, run = null } = {}) {
  if (thread !== state.thread) state.run = null;
  state.view = "thread";
  state.thread = thread;
  state.selected = null;
  if (tab) state.tab = tab;
  else if (!keepTab) state.tab = "graph";
  if (run) state.run = run;
  $("#open-runs").classList.remove("active");
  renderThreads();
  setHash();
  fill($("#main"), empty(`Loading ${thread}…`));
  try {
    const [describe, hist, usage] = await Promise.all([
      api.get(api.thread(state.ns, thread), { include_data: true }),
      can("state.history")
        ? api.get(api.thread(state.ns, thread, "/history"), { limit: GRAPH_MAX, descending: true })
        : Promise.resolve({ nodes: [] }),
      api.get(api.thread(state.ns, thread, "/stats")),
    ]);
    state.describe = describe;
    state.usage = usage;
    state.nodes = hist.nodes.slice().reverse();
    state.byId = new Map(state.nodes.map((n) => [n.id, n]));
    const g = graphReport();
    state.total = g ? g.node_count || 0 : state.nodes.length;
    const llms = threadLlms();
    if (!llms.includes(state.llm)) state.llm = llms[0];
  } catch (err) {
    failIn($("#main"), err);
    return;
  }
  renderThread();
}

function renderThread() {
  const g = graphReport() || { metadata: {} };
  const runs = (storeReport("executions") || {}).data || [];
  const counts = {};
  for (const r of runs) counts[r.status] = (counts[r.status] || 0) + 1;
  // Erased payloads among the nodes shown (their user's data key was destroyed).
  const erased = state.nodes.filter((n) => isErased(n.payload)).length;
  const pruned = (g.metadata.sequence ?? 0) - (g.node_count ?? 0);
  const active = state.usage ? state.usage.last_activity : null;
  const header = h(
    "div",
    { class: "thread-header" },
    h(
      "div",
      { class: "thread-title" },
      h("h2", {}, state.thread),
      h("span", { class: "scope-name mono" }, `${state.ns} / thread:${state.thread}`),
    ),
    h(
      "div",
      { class: "thread-stats" },
      h("span", { class: "thread-nodes" }, h("b", {}, String(state.total)), " nodes"),
      h("span", {}, "generation ", h("b", {}, String(g.metadata.generation ?? 0))),
      h("span", { class: "thread-size", title: `${g.size_bytes ?? 0} bytes of stored payloads` }, h("b", {}, bytes(g.size_bytes)), " stored"),
      pruned > 0
        ? h("span", { class: "thread-pruned", title: "nodes removed by prune (tether prune)" }, h("b", {}, String(pruned)), " pruned")
        : null,
      active ? h("span", { class: "thread-active" }, "last activity ", h("b", {}, active)) : null,
      h("span", {}, "frontier ", h("b", {}, String((g.metadata.frontier || []).length))),
      Object.entries(counts).map(([st, n]) => h("span", {}, statusBadge(st), ` ${n}`)),
      erased
        ? h(
            "span",
            { class: "erased-count", title: "payloads whose data key was destroyed (erasure)" },
            badge("erased", "bad"),
            ` ${erased}`,
          )
        : null,
    ),
    h(
      "div",
      { class: "thread-actions" },
      h("button", { class: "btn", onclick: () => openThread(state.thread, { keepTab: true }) }, "Refresh"),
      h("button", { class: "btn", disabled: !can("state.export"), onclick: exportThread }, "Export"),
      h("button", { class: "btn", disabled: !can("state.verify"), onclick: verifyThread }, "Verify"),
      h(
        "button",
        { id: "clear-thread", class: "btn danger", disabled: !can("state.reset"), onclick: clearThread },
        "Clear state",
      ),
    ),
  );
  const tabs = h(
    "nav",
    { class: "tabs", role: "tablist" },
    TABS.map((t) =>
      h(
        "button",
        {
          class: ["tab", t === state.tab && "active"],
          role: "tab",
          "aria-selected": t === state.tab ? "true" : "false",
          dataset: { tab: t },
          onclick: () => {
            state.tab = t;
            setHash();
            renderThread();
          },
        },
        t[0].toUpperCase() + t.slice(1),
      ),
    ),
  );
  const body = h("div", { class: "tab-body", id: "tab-body" });
  fill($("#main"), header, tabs, body);
  ({ graph: renderGraphTab, conversation: renderConversationTab, variables: renderVariablesTab,
     memory: renderMemoryTab, tools: renderToolsTab, runs: renderRunsTab })[state.tab](body);
}

// ------------------------------------------------------------------ graph tab

// A framework saver's own nodes (LangGraph checkpoints, id pointers, list trees,
// pending writes, encoded values): resource nodes whose payload names an `lg`
// type. Hidden from the graph by default, one click away; the messages they hold
// (goal, inference, tool_result nodes) stay.
function isBookkeeping(n) {
  return n.kind === "resource" && n.payload && typeof n.payload === "object" && typeof n.payload.lg === "string";
}

function legend(nodes) {
  const kinds = [...new Set(nodes.map((n) => n.kind))];
  return h(
    "div",
    { class: "legend" },
    kinds.map((k) => h("span", { class: `legend-item kind-${k}` }, h("i", {}), k.replace("_", " "))),
    h("span", { class: "legend-item legend-head" }, h("i", {}), "frontier (head)"),
    h("span", { class: "legend-item legend-version" }, h("i", {}), "previous version"),
  );
}

function renderGraphTab(body) {
  if (!state.nodes.length) {
    body.append(empty(state.total ? "This token cannot read history (grant state.history)." : "This thread holds no nodes."));
    return;
  }
  const g = graphReport() || { metadata: {} };
  const hidden = state.bookkeeping ? 0 : state.nodes.filter(isBookkeeping).length;
  const shown = hidden ? state.nodes.filter((n) => !isBookkeeping(n)) : state.nodes;
  const drawn = drawGraph(shown, g.metadata.frontier || [], (n) => selectNode(n.id));
  state.graph = drawn;
  const note =
    state.total > state.nodes.length
      ? h("p", { class: "note" }, `Showing the newest ${state.nodes.length} of ${state.total} nodes.`)
      : null;
  const toggle =
    hidden || state.bookkeeping
      ? h(
          "p",
          { class: "note" },
          h(
            "button",
            {
              class: "link",
              id: "bookkeeping-toggle",
              onclick: () => {
                state.bookkeeping = !state.bookkeeping;
                renderThread();
              },
            },
            state.bookkeeping
              ? "Hide the saver's bookkeeping nodes"
              : `Show ${hidden} bookkeeping nodes (checkpoints, pointers, list trees, writes)`,
          ),
        )
      : null;
  const panel = h("aside", { class: "node-panel", id: "node-panel" }, empty("Click a node to see it and the state it serves."));
  body.append(
    h(
      "div",
      { class: "graph-layout" },
      h("div", { class: "graph-pane" }, legend(shown), note, toggle, h("div", { class: "graph-scroll" }, drawn.svg)),
      panel,
    ),
  );
  if (state.selected && state.byId.has(state.selected)) selectNode(state.selected);
}

function servesState(node) {
  const p = node.payload || {};
  if (isErased(p)) return null; // nothing left to show but the node itself
  if (node.kind === "resource" && typeof p.name === "string") return "variable";
  if (node.kind === "semantic") return p.type === "summary" ? "conversation" : "memory";
  if (typeof p.llm === "string" && p.llm) return "conversation";
  return null;
}

function selectNode(id, tab) {
  const node = state.byId.get(id);
  const panel = $("#node-panel");
  if (!panel) return;
  if (!node) {
    fill(panel, empty(`Node ${shortId(id)} is older than the nodes shown.`));
    return;
  }
  state.selected = id;
  state.graph && state.graph.select(id);
  const kind = servesState(node);
  const which = tab || (panel.dataset.tab && kind ? panel.dataset.tab : "node");
  panel.dataset.tab = which;
  const tabs = h(
    "nav",
    { class: "tabs small" },
    h("button", { class: ["tab", which === "node" && "active"], dataset: { paneltab: "node" }, onclick: () => selectNode(id, "node") }, "Node"),
    kind
      ? h("button", { class: ["tab", which === "state" && "active"], dataset: { paneltab: "state" }, onclick: () => selectNode(id, "state") }, "State")
      : null,
  );
  const content = h("div", { class: "panel-body" });
  fill(
    panel,
    h("header", { class: "panel-head" }, h("span", { class: `kind-chip kind-${node.kind}` }, node.kind.replace("_", " ")), h("span", { class: "panel-summary" }, summarize(node))),
    tabs,
    content,
  );
  if (which === "state" && kind) renderNodeState(node, kind, content);
  else {
    content.append(nodeFields(node, (p) => selectNode(p)));
    const summary = summaryBlock(node);
    if (summary) content.append(summary);
    content.append(h("h4", {}, "payload"), payloadBlock(node.payload));
  }
}

async function renderNodeState(node, kind, content) {
  const p = node.payload || {};
  const scope = `thread:${state.thread}`;
  content.append(empty("Loading…"));
  try {
    if (kind === "conversation") {
      const llm = p.llm || p.key || state.llm;
      const r = await api.get(api.thread(state.ns, state.thread), { include_data: true, stores: "conversation", llm });
      const conv = r.stores.find((s) => s.name === "conversation");
      fill(
        content,
        stateHead("Conversation memory", `${scope} · llm ${llm}`, "Clear state", () =>
          resetStores(["conversation"], llm, `the conversation of llm ${llm} in ${scope}`),
        ),
        h("p", { class: "note" }, `${conv.message_count ?? 0} messages, as the model sees them now.`),
        conversationView(conv.data),
      );
    } else if (kind === "memory") {
      const [heads, versions] = await Promise.all([
        api.get(api.ns(state.ns, "/resources"), { scope, prefix: "semantic:" }),
        api.get(api.ns(state.ns, "/versions"), { scope, key: node.resourceKey }),
      ]);
      const live = Object.entries(heads.resources).filter(
        ([k, n]) => !k.startsWith("semantic:summary:") && n.payload.content !== null,
      );
      fill(
        content,
        stateHead("Memory", scope, "Clear state", () => resetStores(["memory"], null, `every memory entry of ${scope}`)),
        live.length
          ? h("dl", { class: "dict" }, live.map(([k, n]) => [h("dt", { class: "mono" }, keyLabel(k)), h("dd", { class: "mono" }, memoryValue(n))]))
          : empty("No live memory entries."),
        h("h4", {}, `versions of ${p.type}:${p.key}`),
        versionList(versions.versions, memoryValue, (nid) => selectNode(nid)),
      );
    } else {
      const versions = await api.get(api.ns(state.ns, "/versions"), { scope, key: node.resourceKey });
      const run = /^run:([^:]+):var:/.exec(node.resourceKey || "");
      fill(
        content,
        stateHead(`Variable ${p.name}`, run ? `${scope} · run ${run[1]}` : scope, "Clear state", () =>
          resetVariable(p.name, run ? run[1] : null),
        ),
        h("p", {}, "type ", h("b", {}, String(p.type)), " · current ", h("span", { class: "mono" }, variableValue(versions.versions.at(-1) || node))),
        h("h4", {}, "versions"),
        versionList(versions.versions, variableValue, (nid) => selectNode(nid)),
      );
    }
  } catch (err) {
    failIn(content, err);
  }
}

function stateHead(title, scope, action, onClick) {
  return h(
    "div",
    { class: "state-head" },
    h("div", {}, h("h3", {}, title), h("span", { class: "scope-name mono" }, scope)),
    h("button", { class: "btn small danger", disabled: !can("state.reset"), onclick: onClick }, action),
  );
}

// ------------------------------------------------------------------ other tabs

async function renderConversationTab(body) {
  const llms = threadLlms();
  const select = h(
    "select",
    {
      onchange: (e) => {
        state.llm = e.target.value;
        renderThread();
      },
    },
    llms.map((l) => h("option", { value: l, selected: l === state.llm }, l)),
  );
  const list = h("div", {}, empty("Loading…"));
  body.append(
    h("div", { class: "toolbar" }, h("label", {}, "LLM node ", select), h("span", { class: "scope-name mono" }, `thread:${state.thread}`)),
    list,
  );
  try {
    const r = await api.get(api.thread(state.ns, state.thread), { include_data: true, stores: "conversation", llm: state.llm });
    const conv = r.stores.find((s) => s.name === "conversation");
    fill(list, conversationView(conv.data));
  } catch (err) {
    failIn(list, err);
  }
}

async function resourceSection(title, scope, prefix, columns, filter, valueOf, actions = null) {
  const box = h("div", {}, empty("Loading…"));
  const section = scopeSection(title, scope, box, actions);
  (async () => {
    try {
      const r = await api.get(api.ns(state.ns, "/resources"), { scope, prefix });
      const rows = Object.entries(r.resources)
        .filter(([k, n]) => filter(k, n))
        .map(([key, node]) => ({
          key,
          node,
          erased: isErased(node.payload),
          deleted: node.payload.deleted === true || (node.kind === "semantic" && node.payload.content === null),
        }));
      fill(
        box,
        resourceTable(rows, columns, async (row) => {
          const v = await api.get(api.ns(state.ns, "/versions"), { scope, key: row.key });
          return versionList(v.versions, valueOf, null);
        }),
      );
    } catch (err) {
      fill(box, empty(err.message));
    }
  })();
  return section;
}

function scopesOfThread() {
  return [
    ["Thread", `thread:${state.thread}`],
    ...threadUsers().map((u) => [`User ${u}`, `user:${u}`]),
    ["App", "app"],
  ];
}

async function renderVariablesTab(body) {
  const cols = [
    { title: "name", cls: "mono", get: (r) => (r.erased ? keyLabel(r.key) : r.node.payload.name) },
    { title: "type", get: (r) => (r.erased ? badge("erased", "bad") : r.node.payload.type) },
    { title: "value", cls: "mono value", get: (r) => variableValue(r.node) },
    { title: "#", cls: "mono muted", get: (r) => String(r.node.sequence) },
  ];
  const isVar = (k, n) => n.kind === "resource" && (k.startsWith("var:") || /^run:[^:]+:var:/.test(k));
  for (const [title, scope] of scopesOfThread()) {
    body.append(await resourceSection(title, scope, "", cols, isVar, variableValue));
  }
}

async function renderMemoryTab(body) {
  const cols = [
    { title: "type", get: (r) => (r.erased ? keyLabel(r.key).split(":")[0] : r.node.payload.type) },
    { title: "key", cls: "mono", get: (r) => (r.erased ? keyLabel(r.key).split(":").slice(1).join(":") : r.node.payload.key) },
    { title: "content", cls: "mono value", get: (r) => memoryValue(r.node) },
    { title: "#", cls: "mono muted", get: (r) => String(r.node.sequence) },
  ];
  // Summaries are listed below; tool state has its own tab.
  const isMemory = (k) => !k.startsWith("semantic:summary:") && !k.startsWith(TOOL_STATE);
  for (const [title, scope] of scopesOfThread()) {
    body.append(await resourceSection(title, scope, "semantic:", cols, isMemory, memoryValue));
  }
  body.append(
    await resourceSection("Compaction summaries", `thread:${state.thread}`, "semantic:summary:", cols, () => true, memoryValue),
  );
}

async function renderToolsTab(body) {
  const cols = [
    { title: "tool", cls: "mono", get: (r) => toolKey(r)[0] },
    { title: "key", cls: "mono", get: (r) => toolKey(r)[1] },
    { title: "value", cls: "mono value", get: (r) => memoryValue(r.node) },
    { title: "#", cls: "mono muted", get: (r) => String(r.node.sequence) },
  ];
  body.append(
    h("p", { class: "note" }, "Each stateful tool's own key-value state, per scope, committed with the call that wrote it."),
  );
  const thread = `thread:${state.thread}`;
  const clear = h(
    "button",
    { class: "btn small danger", id: "clear-tools", disabled: !can("state.reset"), onclick: () => resetStores(["tools"], null, `the tool state of ${thread}`) },
    "Clear state",
  );
  for (const [title, scope] of scopesOfThread()) {
    const actions = scope === thread ? clear : null;
    body.append(await resourceSection(title, scope, TOOL_STATE, cols, () => true, memoryValue, actions));
  }
}

/** [tool, key] of a tool-state row, from its resource key (kept when a payload is erased). */
function toolKey(row) {
  const rest = row.key.slice(TOOL_STATE.length);
  const cut = rest.indexOf("/");
  return cut < 0 ? [rest, ""] : [rest.slice(0, cut), rest.slice(cut + 1)];
}

function byRun(report) {
  return new Map(((report || {}).data || []).map((x) => [x.run, x]));
}

function renderRunsTab(body) {
  const report = storeReport("executions") || {};
  const runs = report.data || [];
  const erased = (report.metadata || {}).erased || 0;
  const tasks = byRun(storeReport("task"));
  const detail = h("div", { class: "run-detail" }, empty("Pick a run to see its status history, flow and executor tree."));
  const open = (run) => openRun(run, detail, tasks, byRun(storeReport("flow")));
  body.append(h("div", { class: "exec-layout" }, h("div", {}, runsTable(runs.slice().reverse(), (r) => open(r.run), erased, tasks)), detail));
  if (state.run && runs.some((r) => r.run === state.run)) open(state.run);
}

async function openRun(run, box, tasks, flows) {
  state.run = run;
  setHash();
  fill(box, empty("Loading…"));
  for (const tr of document.querySelectorAll("tr[data-run]")) tr.classList.toggle("active", tr.dataset.run === run);
  const task = tasks.get(run);
  try {
    const exec = await api.get(api.thread(state.ns, state.thread, `/runs/${encodeURIComponent(run)}`));
    const decide = state.whoami.agent && can("agent.approve") ? (call, ok, what) => decideCall(call, ok, what) : null;
    fill(
      box,
      h(
        "header",
        { class: "run-head" },
        h("h3", { class: "mono" }, run),
        task ? statusBadge(task.status) : null,
        task ? h("span", { class: "muted" }, `started ${when(task.started_at)}`) : null,
        traceLink(exec.trace_id),
      ),
      task
        ? h(
            "div",
            { class: "run-grid" },
            h("section", { class: "run-task" }, h("h4", {}, "status history"), statusHistory(task, showNode)),
            h("section", { class: "run-meta" }, h("h4", {}, "metadata"), metadataChips(task.metadata)),
          )
        : null,
      h("section", { class: "run-flow" }, h("h4", {}, "flow"), flowView(flows.get(run))),
      h("section", {}, h("h4", {}, "executor tree"), h("ul", { class: "exec-root" }, executionTree(exec, decide))),
    );
  } catch (err) {
    failIn(box, err);
  }
}

/** A link to the run's trace, when the run was traced and the server names a trace URL. */
function traceLink(traceId) {
  const template = state.whoami && state.whoami.trace_url;
  if (!template || typeof traceId !== "string" || !/^[0-9a-f]{32}$/.test(traceId)) return null;
  const href = template.split("{trace_id}").join(traceId);
  return h(
    "a",
    { class: "trace-link mono", href, target: "_blank", rel: "noopener noreferrer", title: `trace ${traceId}` },
    "trace ↗",
  );
}

/** Show a node of the thread in the graph tab (from a run's status history). */
function showNode(id) {
  state.tab = "graph";
  state.selected = id;
  setHash();
  renderThread();
}

// ------------------------------------------------------------------ the namespace's runs

async function openRuns({ more = false } = {}) {
  state.view = "runs";
  state.thread = null;
  renderThreads();
  $("#open-runs").classList.add("active");
  setHash();
  if (!more) fill($("#main"), empty("Loading runs…"));
  const f = state.runFilter;
  try {
    const page = await api.get(api.ns(state.ns, "/runs"), {
      status: f.status,
      user: f.user,
      limit: RUNS_PAGE,
      after: more && state.runPage ? state.runPage.next_after : null,
    });
    state.runPage = more ? { ...page, runs: [...state.runPage.runs, ...page.runs] } : page;
  } catch (err) {
    failIn($("#main"), err);
    return;
  }
  renderRuns();
}

function renderRuns() {
  const page = state.runPage;
  const f = state.runFilter;
  const total = Object.values(page.counts).reduce((a, b) => a + b, 0);
  const filters = h(
    "div",
    { class: "status-filters", role: "group", "aria-label": "status" },
    RUN_FILTERS.map(([status, label]) =>
      h(
        "button",
        {
          class: ["filter-chip", f.status === status && "active", status && `filter-${status}`],
          dataset: { status },
          onclick: () => {
            f.status = status;
            openRuns();
          },
        },
        label,
        h("span", { class: "count" }, String(status ? page.counts[status] || 0 : total)),
      ),
    ),
  );
  const user = h("input", {
    class: "filter user-filter",
    type: "search",
    placeholder: "user id",
    value: f.user,
    onchange: (e) => {
      f.user = e.target.value.trim();
      openRuns();
    },
  });
  fill(
    $("#main"),
    h(
      "div",
      { class: "thread-header" },
      h(
        "div",
        { class: "thread-title" },
        h("h2", {}, "Runs"),
        h("span", { class: "scope-name mono" }, `${state.ns} / the run index (app)`),
      ),
      h(
        "div",
        { class: "thread-stats" },
        Object.entries(page.counts).map(([st, n]) => h("span", {}, statusBadge(st), ` ${n}`)),
      ),
      h("div", { class: "thread-actions" }, h("label", { class: "muted" }, "user ", user), h("button", { class: "btn", onclick: () => openRuns() }, "Refresh")),
    ),
    filters,
    h(
      "div",
      { class: "scope-section" },
      runIndexTable(page.runs, (r) => openThread(r.thread, { tab: "runs", run: r.run })),
      page.next_after
        ? h("div", { class: "more" }, h("button", { class: "btn small", onclick: () => openRuns({ more: true }) }, "Load more"))
        : null,
    ),
  );
}

// ------------------------------------------------------------------ actions

async function clearThread() {
  const t = state.thread;
  const ok = await confirmDialog(
    `Clear state of thread ${t}?`,
    `This deletes all ${state.total} nodes of thread:${t} in namespace ${state.ns}: its conversation, ` +
      "runs, thread variables and thread memory. User and app scopes are kept. It cannot be undone " +
      "(export first to keep a copy).",
    "Clear state",
  );
  if (!ok) return;
  try {
    const r = await api.del(api.thread(state.ns, t));
    toast(r.cleared.length ? `Cleared ${r.cleared.join(", ")}` : `Nothing to clear in thread:${t}`, "ok");
  } catch (err) {
    fail(err);
    return;
  }
  state.thread = null;
  state.describe = null;
  setHash();
  await loadThreads();
  fill($("#main"), h("div", { class: "welcome" }, h("h2", {}, `Thread ${t} was cleared`), h("p", {}, "Its graph is gone; pick another thread on the left.")));
}

/** Reset part of the open thread (`fields` of a reset request), after a confirmation. */
async function resetPart(fields, title, text) {
  if (!(await confirmDialog(title, text, "Clear state"))) return;
  try {
    const r = await api.post("/state/reset", { namespace: state.ns, thread: state.thread, ...fields });
    // /state/* names Protolink's stores first ("tools"); the exact labels ("thread:t/tools") say more.
    const exact = r.cleared.filter((c) => c.includes(":"));
    toast(exact.length ? `Cleared ${exact.join(", ")}` : "Nothing to clear", "ok");
  } catch (err) {
    fail(err);
    return;
  }
  await Promise.all([openThread(state.thread, { keepTab: true }), refreshThreadList()]);
}

function resetStores(stores, llm, what) {
  const text = `This clears ${what}. The graph keeps the history (new nodes mark the reset).`;
  return resetPart({ stores, ...(llm ? { llm } : {}) }, `Clear ${stores.join(", ")}?`, text);
}

function resetVariable(name, run) {
  const text = `A delete version of ${name} is written; older versions stay in the graph.`;
  return resetPart({ variable: name, ...(run ? { run } : {}) }, `Clear variable ${name}?`, text);
}

async function exportThread() {
  try {
    const resp = await fetch(api.thread(state.ns, state.thread, "/export"), {
      headers: { Authorization: `Bearer ${api.token}` },
      cache: "no-store",
    });
    if (!resp.ok) throw new ApiError(resp.status, await resp.json().catch(() => null));
    const blob = await resp.blob();
    const a = h("a", { href: URL.createObjectURL(blob), download: `${state.thread}.json` });
    document.body.append(a);
    a.click();
    a.remove();
    toast(`Exported thread:${state.thread} (${bytes(blob.size)})`, "ok");
  } catch (err) {
    fail(err);
  }
}

async function verifyThread() {
  try {
    const r = await api.get(api.thread(state.ns, state.thread, "/verify"));
    const c = r.checks[0];
    if (c.ok) toast(`Verified ${c.checked} nodes: every identity and link holds`, "ok");
    else toast(`Verification failed at node ${c.index} (${c.node_id}): ${c.code}: ${c.message}`, "bad");
  } catch (err) {
    fail(err);
  }
}

/** Approve or reject a waiting tool call, after a confirmation (a tool may move money). */
async function decideCall(call, approve, what) {
  const verb = approve ? "Approve" : "Reject";
  const text = approve
    ? `Approve ${what || "the call"} (call ${call}) in thread ${state.thread}? The tool runs at once and the run continues.`
    : `Reject ${what || "the call"} (call ${call}) in thread ${state.thread}? The tool does not run; the model is told it was refused.`;
  if (!(await confirmDialog(`${verb} tool call`, text, verb))) return;
  try {
    const r = await api.post(api.thread(state.ns, state.thread, approve ? "/approve" : "/reject"), { call });
    toast(`${approve ? "Approved" : "Rejected"} ${call}: run ${r.status}`, "ok");
  } catch (err) {
    fail(err);
    return;
  }
  await Promise.all([openThread(state.thread, { keepTab: true }), refreshThreadList()]);
}

// ------------------------------------------------------------------ start

function start() {
  const params = new URLSearchParams(location.hash.slice(1));
  state.ns = params.get("ns") || "default";
  state.thread = params.get("thread");
  if (TABS.includes(params.get("tab"))) state.tab = params.get("tab");
  state.run = params.get("run");
  if (params.get("view") === "runs") state.view = "runs";
  state.runFilter = { status: params.get("status") || "", user: params.get("user") || "" };
  $("#namespace").value = state.ns;
  $("#token").value = api.token;
  $("#login").addEventListener("submit", async (e) => {
    e.preventDefault();
    const ns = $("#namespace").value.trim() || "default";
    if (ns !== state.ns) {
      state.thread = null;
      state.runPage = null;
    }
    state.ns = ns;
    api.setToken($("#token").value.trim());
    setHash();
    await connect();
  });
  $("#thread-filter").addEventListener("input", renderThreads);
  $("#reload-threads").addEventListener("click", () => loadThreads());
  $("#open-runs").addEventListener("click", () => (state.whoami ? openRuns() : null));
  $("#confirm").addEventListener("cancel", () => ($("#confirm").returnValue = "cancel"));
  fill($("#main"), welcome());
  if (api.token) connect();
  else fill($("#threads"), empty("Connect with a token to list threads."));
}

start();
