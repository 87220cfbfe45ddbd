// The inspector's panels, each a pure function of data the API returned.

import { ERASED_TEXT, badge, brief, empty, h, isErased, pretty, shortId, when, whenShort } from "./dom.js";

const ERASED_NOTE =
  "This payload was erased: its data key was destroyed (the user's data was erased). " +
  "The node's id, kind, parents and sequence remain; its content cannot be recovered.";

const STATUS_KIND = {
  completed: "ok",
  running: "info",
  suspended: "warn",
  failed: "bad",
  idle: "muted",
};

export function statusBadge(status) {
  return badge(status, STATUS_KIND[status] || "muted");
}

// ------------------------------------------------------------------ conversation

function toolCallChip(call) {
  const fn = call.function || {};
  const name = call.name || fn.name || "tool";
  const args = call.arguments ?? fn.arguments ?? {};
  return h("div", { class: "tool-call" }, "→ ", h("b", {}, name), `(${brief(args, 120)})`);
}

/** The messages an LLM node sees (OpenAI-style dicts), as a chat. */
export function conversationView(messages) {
  if (!messages || !messages.length) return empty("No messages: the conversation is empty.");
  return h(
    "ol",
    { class: "chat" },
    messages.map((m) => {
      const role = m.role || "?";
      const summary = role === "system" && /^Summary of earlier/.test(m.content || "");
      const calls = Array.isArray(m.tool_calls) ? m.tool_calls : [];
      const erased = m.content === ERASED_TEXT && !calls.length && !m.tool_call_id;
      return h(
        "li",
        { class: ["msg", `msg-${role}`, summary && "msg-summary", erased && "msg-erased"] },
        h(
          "div",
          { class: "msg-head" },
          h("span", { class: "msg-role" }, summary ? "summary" : role),
          m.tool_call_id ? h("span", { class: "msg-call mono" }, m.tool_call_id) : null,
          erased ? badge("erased", "muted") : null,
        ),
        erased
          ? h("div", { class: "msg-content erased" }, "This message was erased.")
          : m.content !== null && m.content !== undefined && m.content !== ""
            ? h("div", { class: "msg-content" }, pretty(m.content))
            : null,
        calls.map(toolCallChip),
      );
    }),
  );
}

// ------------------------------------------------------------------ versions

/** A list of versions of one resource key (oldest first), newest marked current. */
export function versionList(nodes, valueOf, onNode) {
  if (!nodes.length) return empty("No versions.");
  return h(
    "ol",
    { class: "versions" },
    nodes.map((n, i) =>
      h(
        "li",
        { class: i === nodes.length - 1 ? "current" : null },
        h(
          "button",
          { class: "link mono", onclick: () => onNode && onNode(n.id), title: n.id },
          `#${n.sequence}`,
        ),
        " ",
        h("span", { class: "mono value" }, valueOf(n)),
        h("span", { class: "muted" }, ` ${when(n.createdAt)}`),
        i === nodes.length - 1 ? badge("current", "ok") : null,
      ),
    ),
  );
}

export function variableValue(node) {
  const p = node.payload || {};
  if (isErased(p)) return "(erased)";
  if (p.deleted) return "(deleted)";
  return brief(p.value, 120) + (p.coerced === false && p.error ? `  ⚠ ${p.error}` : "");
}

export function memoryValue(node) {
  const p = node.payload || {};
  if (isErased(p)) return "(erased)";
  return p.content === null ? "(deleted)" : brief(p.content, 120);
}

/** A resource head's name as its key says (a variable, or type:key of a memory): the
 * key is stored in clear, so it survives an erased payload. */
export function keyLabel(key) {
  const run = /^run:[^:]+:var:(.*)$/.exec(key);
  if (run) return run[1];
  if (key.startsWith("var:")) return key.slice(4);
  if (key.startsWith("semantic:")) return key.slice(9);
  return key;
}

// ------------------------------------------------------------------ variables & memory

/**
 * A table of resource heads. rows: [{key, label, type, node}]; onVersions(row) loads
 * and returns the versions element.
 */
export function resourceTable(rows, columns, onVersions) {
  if (!rows.length) return empty("Nothing here.");
  const body = h("tbody");
  for (const row of rows) {
    const slot = h("td", { class: "versions-slot", colspan: columns.length + 1 });
    const more = h("tr", { class: "versions-row", hidden: true }, slot);
    const toggle = h(
      "button",
      {
        class: "link",
        onclick: async () => {
          more.hidden = !more.hidden;
          if (!more.hidden && !slot.firstChild) slot.append(await onVersions(row));
        },
      },
      "versions",
    );
    body.append(
      h(
        "tr",
        { class: row.erased ? "erased" : row.deleted ? "deleted" : null, dataset: { key: row.key } },
        columns.map((c) => h("td", { class: c.cls }, c.get(row))),
        h("td", { class: "right" }, toggle),
      ),
      more,
    );
  }
  return h(
    "table",
    { class: "grid" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        columns.map((c) => h("th", {}, c.title)),
        h("th", {}),
      ),
    ),
    body,
  );
}

export function scopeSection(title, scope, content, actions) {
  return h(
    "section",
    { class: "scope-section" },
    h(
      "header",
      {},
      h("h3", {}, title),
      h("span", { class: "scope-name mono" }, scope),
      h("span", { class: "spacer" }),
      actions || null,
    ),
    content,
  );
}

// ------------------------------------------------------------------ execution

/** Caller metadata as small key=value chips ("user" first: it names who the run is for). */
export function metadataChips(metadata) {
  const entries = Object.entries(metadata || {}).sort(([a], [b]) =>
    a === "user" ? -1 : b === "user" ? 1 : a.localeCompare(b),
  );
  if (!entries.length) return h("span", { class: "muted" }, "none");
  return h(
    "span",
    { class: "chips" },
    entries.map(([k, v]) => h("span", { class: "chip mono", title: `${k}: ${JSON.stringify(v)}` }, `${k}=${brief(v, 40)}`)),
  );
}


/** A thread's runs (the executions store); `tasks` maps a run id to its TaskState, for
 * the caller's metadata. */
export function runsTable(runs, onOpen, erased = 0, tasks = new Map()) {
  const note = erased
    ? h(
        "p",
        { class: "note erased-runs" },
        badge("erased", "muted"),
        ` ${erased} run${erased === 1 ? " was" : "s were"} erased (their run ids with them).`,
      )
    : null;
  if (!runs || !runs.length) return note || empty("No runs in this thread.");
  const table = h(
    "table",
    { class: "grid runs" },
    h(
      "thead",
      {},
      h("tr", {}, h("th", {}, "started"), h("th", {}, "status"), h("th", {}, "input"), h("th", {}, "metadata")),
    ),
    h(
      "tbody",
      {},
      runs.map((r) =>
        h(
          "tr",
          { class: "clickable", onclick: () => onOpen(r), dataset: { run: r.run }, title: r.run },
          h("td", { class: "muted", title: when(r.started_at) }, whenShort(r.started_at)),
          h("td", {}, statusBadge(r.status), r.reset ? [" ", badge("reset", "muted")] : null),
          h("td", {}, brief(r.input, 80)),
          h("td", {}, metadataChips((tasks.get(r.run) || {}).metadata)),
        ),
      ),
    ),
  );
  return note ? h("div", {}, note, table) : table;
}

/** Liman's executor tree; `decide(call, approve)` when approvals can be given here. */
export function executionTree(exec, decide) {
  const actor = exec.actor || {};
  const st = actor.node_state || {};
  const label =
    exec.kind === "run"
      ? `run ${exec.run}`
      : exec.kind === "llm"
        ? `llm ${actor.node_name}`
        : `${actor.node_name}(${brief(st.input, 60)})`;
  const detail = [];
  if (exec.kind === "tool_call" && st.output !== null && st.output !== undefined) {
    detail.push(h("div", { class: "exec-output mono" }, "⇒ ", brief(st.output, 160)));
  }
  if (exec.kind === "tool_call" && exec.status === "suspended" && decide) {
    detail.push(
      h(
        "div",
        { class: "exec-actions" },
        h("button", { class: "btn small", onclick: () => decide(st.call_id, true, label) }, "Approve"),
        h(
          "button",
          { class: "btn small danger", onclick: () => decide(st.call_id, false, label) },
          "Reject",
        ),
      ),
    );
  }
  return h(
    "li",
    { class: "exec", dataset: { execution: exec.execution_id } },
    h(
      "div",
      { class: "exec-head" },
      statusBadge(exec.status),
      h("span", { class: "exec-label" }, label),
      h("span", { class: "mono muted" }, shortId(exec.execution_id)),
    ),
    detail,
    exec.children && exec.children.length
      ? h(
          "ul",
          { class: "exec-children" },
          exec.children.map((c) => executionTree(c, decide)),
        )
      : null,
  );
}

// ------------------------------------------------------------------ node detail

export function nodeFields(node, onNode) {
  const rows = [
    ["id", h("span", { class: "mono" }, node.id)],
    ["kind", node.kind],
    ["sequence", String(node.sequence)],
    ["created", when(node.createdAt)],
  ];
  if (node.resourceKey) rows.push(["resource", h("span", { class: "mono" }, node.resourceKey)]);
  rows.push([
    "parents",
    node.parents.length
      ? h(
          "span",
          { class: "parents" },
          node.parents.map((p) =>
            h("button", { class: "link mono", onclick: () => onNode(p), title: p }, shortId(p)),
          ),
        )
      : h("span", { class: "muted" }, "none (a root)"),
  ]);
  return h(
    "dl",
    { class: "fields" },
    rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
  );
}

/** A compaction summary (a `semantic` node of type `summary`) in words, or null. */
export function summaryBlock(node) {
  const p = node.payload;
  if (node.kind !== "semantic" || !p || p.type !== "summary") return null;
  const c = p.content;
  if (c === null || typeof c !== "object") {
    return h("div", { class: "summary-block" }, h("p", {}, `Compaction of llm ${p.key} undone: no summary before it.`));
  }
  const lines = [
    h(
      "p",
      { class: "summary-meta" },
      `Stands for ${c.count ?? "?"} earlier message${c.count === 1 ? "" : "s"} of llm ${p.key}, `,
      `up to node #${c.through ?? "?"} (strategy ${c.strategy ?? "?"}).`,
    ),
    c.text
      ? h("blockquote", { class: "summary-text" }, c.text)
      : h("p", { class: "note" }, "No summary text: the model sees only the messages after it."),
  ];
  if (c.undoes) lines.push(h("p", { class: "note" }, `Undoes ${c.undoes}.`));
  return h("div", { class: "summary-block" }, h("h4", {}, "summary"), lines);
}

export function payloadBlock(payload) {
  if (isErased(payload)) {
    return h("div", { class: "payload payload-erased" }, badge("erased", "bad"), " ", ERASED_NOTE);
  }
  return h("pre", { class: "payload" }, JSON.stringify(payload, null, 2));
}
