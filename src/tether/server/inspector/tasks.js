// Task and flow state (Protolink's task and flow modules), each a pure function of what
// the API returned: a run's status history and metadata, its progress through the
// spec, and the namespace's runs from the run index.

import { badge, brief, empty, h, shortId, when, whenShort } from "./dom.js";
import { metadataChips, statusBadge } from "./views.js";

// The run index's statuses, as a person reads them.
export const RUN_FILTERS = [
  ["", "All"],
  ["suspended", "Waiting for a human"],
  ["running", "Running"],
  ["completed", "Completed"],
  ["failed", "Failed"],
];

/** Milliseconds from `from` to `to` as "+12 ms", "+3.4 s", "+2 min". */
export function elapsed(from, to) {
  const ms = new Date(to).getTime() - new Date(from).getTime();
  if (!Number.isFinite(ms)) return "";
  if (ms < 1000) return `+${ms} ms`;
  if (ms < 60_000) return `+${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `+${Math.round(ms / 60_000)} min`;
  return `+${(ms / 3_600_000).toFixed(1)} h`;
}

/** A run's status transitions, oldest first; `onNode(id)` opens the node that made each. */
export function statusHistory(task, onNode) {
  const steps = task.history || [];
  if (!steps.length) return empty("No status history.");
  return h(
    "ol",
    { class: "timeline" },
    steps.map((t, i) =>
      h(
        "li",
        { class: ["timeline-step", `timeline-${t.status}`, i === steps.length - 1 && "timeline-now"], dataset: { status: t.status } },
        h("span", { class: "timeline-dot" }),
        statusBadge(t.status),
        h("span", { class: "muted", title: when(t.at) }, whenShort(t.at)),
        i ? h("span", { class: "mono muted" }, elapsed(steps[0].at, t.at)) : null,
        h("button", { class: "link mono timeline-node", title: t.node, onclick: () => onNode && onNode(t.node) }, shortId(t.node)),
      ),
    ),
  );
}

/** Where a run stands in its spec: the nodes it ran, the one it is at, its loops and
 * its run-scoped variables. */
export function flowView(flow) {
  if (!flow) return empty("No flow recorded for this run.");
  const loops = Object.entries(flow.loops || {});
  const vars = Object.entries(flow.variables || {});
  return h(
    "div",
    { class: "flow" },
    flowPath(flow),
    h(
      "p",
      { class: "note" },
      flow.current
        ? ["stands at ", h("b", { class: "mono" }, flow.current), ` (${flow.status})`]
        : `finished: ${flow.status}`,
    ),
    loops.length || vars.length
      ? h(
          "div",
          { class: "flow-grid" },
          h("div", {}, h("h4", {}, "loops"), loops.length ? loopTable(loops) : none()),
          h("div", {}, h("h4", {}, "run variables"), vars.length ? runVariables(vars) : none()),
        )
      : null,
  );
}

function none() {
  return h("p", { class: "muted small" }, "none");
}

/** The spec nodes a run executed, in order, its current one marked. */
function flowPath(flow) {
  const path = flow.path || [];
  if (!path.length && !flow.current) {
    return h("div", { class: "flow-path" }, h("span", { class: "muted" }, "no node ran yet"));
  }
  // An unfinished run stands at its last visit (or, between iterations, at its loop).
  const names = flow.current && path.at(-1) !== flow.current ? [...path, flow.current] : path;
  const here = flow.current ? names.length - 1 : -1;
  return h(
    "div",
    { class: "flow-path" },
    names.map((name, i) => [
      i ? h("span", { class: "flow-arrow", "aria-hidden": "true" }, "→") : null,
      h("span", { class: ["flow-step", "mono", i === here && "flow-current"], title: `step ${i + 1}` }, name),
    ]),
  );
}

function loopTable(loops) {
  return h(
    "table",
    { class: "grid compact loops" },
    h("thead", {}, h("tr", {}, h("th", {}, "loop"), h("th", {}, "iteration"), h("th", {}, "state"))),
    h(
      "tbody",
      {},
      loops.map(([name, l]) =>
        h(
          "tr",
          { dataset: { loop: name } },
          h("td", { class: "mono" }, name),
          h("td", { class: "mono" }, String(l.iteration)),
          h("td", {}, l.done ? badge("done", "ok") : badge("in progress", "info")),
        ),
      ),
    ),
  );
}

function runVariables(vars) {
  return h(
    "dl",
    { class: "dict run-vars" },
    vars.map(([k, v]) => [h("dt", { class: "mono" }, k), h("dd", { class: "mono" }, brief(v, 120))]),
  );
}

/** The namespace's runs (RunSummary rows); onOpen(run) opens its thread. */
export function runIndexTable(runs, onOpen) {
  if (!runs.length) return empty("No run matches.");
  return h(
    "table",
    { class: "grid run-index" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["started", "thread", "run", "status", "waiting on", "metadata", "last change"].map((t) => h("th", {}, t)),
      ),
    ),
    h(
      "tbody",
      {},
      runs.map((r) =>
        h(
          "tr",
          { class: "clickable", onclick: () => onOpen(r), dataset: { run: r.run, thread: r.thread, status: r.status } },
          h("td", { class: "muted", title: when(r.started_at) }, whenShort(r.started_at)),
          h("td", { class: "thread-cell" }, r.thread),
          h("td", { class: "mono", title: r.run }, shortRun(r.run)),
          h("td", {}, statusBadge(r.status)),
          h(
            "td",
            { class: "mono" },
            (r.pending || []).length
              ? (r.pending || []).map((p) => h("span", { class: "chip chip-warn", title: p.call_id }, p.name))
              : h("span", { class: "muted" }, "-"),
          ),
          h("td", {}, metadataChips(r.metadata)),
          h("td", { class: "muted", title: when(r.updated_at) }, elapsed(r.started_at, r.updated_at)),
        ),
      ),
    ),
  );
}

/** A run id short enough for a table cell ("run_1a2b3c4d…"). */
export function shortRun(run) {
  return typeof run === "string" && run.length > 14 ? `${run.slice(0, 12)}…` : String(run);
}
