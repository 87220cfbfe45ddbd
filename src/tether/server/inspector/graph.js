// The causal graph as SVG: one row per node in sequence order, branches in lanes.
//
// Layout: a node continues the lane of its earliest parent that is still a lane's
// tip; the other parents' lanes end there (a join). A node with no such parent
// (parallel tool calls after the first, the first node) opens the first free lane;
// a node with no parents at all after the first row continues lane 0.
// Edges go from a parent's bottom to a child's top; an edge to the previous version
// of the same resource key is dashed. Frontier nodes (the heads) are outlined.

import { brief, isErased, s, shortId } from "./dom.js";

export const KIND_COLORS = {
  system: "#64748b",
  goal: "#2563eb",
  inference: "#7c3aed",
  tool_call: "#d97706",
  tool_result: "#0f766e",
  verification: "#0891b2",
  answer: "#16a34a",
  protocol_error: "#dc2626",
  resource: "#db2777",
  semantic: "#78350f",  // brown: far from inference's violet (a test checks the distance)
};

const ROW = 44;
const BOX_W = 290;
const BOX_H = 34;
const LANE_W = 310;
const PAD_X = 56; // room on the left for edges that skip rows
const PAD_Y = 16;

/** A short human summary of a node's payload (display only). */
export function summarize(node) {
  if (isErased(node.payload)) return "erased";
  const p = node.payload && typeof node.payload === "object" ? node.payload : {};
  switch (node.kind) {
    case "goal":
      return brief(p.input, 60);
    case "inference": {
      const calls = Array.isArray(p.tool_calls) ? p.tool_calls : [];
      if (calls.length) return "→ " + calls.map((c) => c.name).join(", ");
      return brief(p.content, 60);
    }
    case "tool_call":
      return `${p.name}(${brief(p.arguments, 40)})`;
    case "tool_result":
      return `${p.name}: ${brief(p.content, 50)}`;
    case "verification":
      return `${p.decision}${p.reason ? ": " + brief(p.reason, 40) : ""}`;
    case "answer":
      return brief(p.output, 60);
    case "protocol_error":
      return p.error ? `${p.error.code}: ${brief(p.error.message, 40)}` : "error";
    case "resource":
      if (typeof p.name === "string") {
        return p.deleted ? `${p.name} deleted` : `${p.name} = ${brief(p.value, 40)}`;
      }
      if (typeof p.node === "string") return `${p.node} → ${brief(p.output, 40)}`;
      if (typeof p.lg === "string") {
        const LG = { cp: "checkpoint", id: "checkpoint id", ns: "checkpoint namespace", seq: "list tree", w: "pending write", ws: "pending writes", del: "deleted checkpoints", val: "value", el: "list element" };
        const what = LG[p.lg] || p.lg;
        if (p.lg === "cp") return `${what} ${brief(p.id, 40)}`;
        if (p.lg === "w") return `${what} ${p.channel}`;
        if (p.lg === "ws" && Array.isArray(p.writes)) return `${what} ${brief(p.writes.map((w) => w.channel).join(", "), 40)}`;
        if (p.lg === "el" && typeof p.content === "string") return `${p.role || what}: ${brief(p.content, 40)}`;
        return what;
      }
      if (typeof p.memory === "string") {
        const keys = Array.isArray(p.edits) ? p.edits.map((e) => e.key).join(", ") : "";
        return `${p.memory} ${p.op} ${keys}`.trim();
      }
      return brief(p, 60);
    case "semantic":
      if (p.type === "summary") {
        const c = p.content;
        if (c === null || typeof c !== "object") return `summary of ${p.key}: compaction undone`;
        const n = `${c.count ?? "?"} message${c.count === 1 ? "" : "s"}`;
        return `summary of ${n} through #${c.through ?? "?"}${c.text ? ": " + brief(c.text, 30) : ""}`;
      }
      return `${p.type}:${p.key} = ${p.content === null ? "∅" : brief(p.content, 36)}`;
    case "system":
      return brief(p.content, 60);
    default:
      return brief(p, 60);
  }
}

/** Lane and row of every node; nodes are in sequence order. */
export function layout(nodes) {
  const lanes = [];
  const pos = new Map();
  nodes.forEach((n, row) => {
    const parentLanes = [];
    lanes.forEach((tip, i) => {
      if (tip !== null && n.parents.includes(tip)) parentLanes.push(i);
    });
    let lane;
    if (!n.parents.length && row > 0 && lanes.length) {
      // Parentless after the first (content-addressed framework messages, whose
      // identity is their content): one column, in sequence order.
      lane = 0;
    } else if (parentLanes.length) {
      lane = Math.min(...parentLanes);
      for (const i of parentLanes) if (i !== lane) lanes[i] = null;
    } else {
      lane = lanes.indexOf(null);
      if (lane < 0) lane = lanes.length;
    }
    lanes[lane] = n.id;
    pos.set(n.id, { lane, row });
  });
  return pos;
}

function edgePath(a, b) {
  if (a.lane === b.lane && b.row - a.row > 1) {
    // Skipping rows in one lane: an arc out to the left, so it never crosses the
    // boxes in between (a resource's previous version, a goal taking old heads).
    const x = PAD_X + a.lane * LANE_W;
    const y1 = PAD_Y + a.row * ROW + BOX_H / 2;
    const y2 = PAD_Y + b.row * ROW + BOX_H / 2;
    const out = x - Math.min(PAD_X - 8, 14 + 3 * Math.log2(b.row - a.row) * 4);
    return `M${x},${y1} C${out},${y1} ${out},${y2} ${x},${y2}`;
  }
  const x1 = PAD_X + a.lane * LANE_W + BOX_W / 2;
  const y1 = PAD_Y + a.row * ROW + BOX_H;
  const x2 = PAD_X + b.lane * LANE_W + BOX_W / 2;
  const y2 = PAD_Y + b.row * ROW;
  if (x1 === x2) return `M${x1},${y1} L${x2},${y2}`;
  const my = (y1 + y2) / 2;
  return `M${x1},${y1} C${x1},${my} ${x2},${my} ${x2},${y2}`;
}

/**
 * Draw `nodes` (sequence order). `frontier`: head ids. `onSelect(node)` on click.
 * Returns {svg, select(id)}.
 */
export function drawGraph(nodes, frontier, onSelect) {
  const pos = layout(nodes);
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const heads = new Set(frontier || []);
  const laneCount = Math.max(1, ...[...pos.values()].map((p) => p.lane + 1));
  const width = PAD_X * 2 + (laneCount - 1) * LANE_W + BOX_W;
  const height = PAD_Y * 2 + Math.max(1, nodes.length) * ROW - (ROW - BOX_H);

  const edges = s("g", { class: "edges" });
  const boxes = s("g", { class: "nodes" });
  const svg = s(
    "svg",
    {
      class: "graph",
      width,
      height,
      viewBox: `0 0 ${width} ${height}`,
      role: "img",
      "aria-label": `causal graph of ${nodes.length} nodes`,
    },
    s(
      "defs",
      {},
      s(
        "marker",
        {
          id: "arrow",
          viewBox: "0 0 10 10",
          refX: 9,
          refY: 5,
          markerWidth: 6,
          markerHeight: 6,
          orient: "auto-start-reverse",
        },
        s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }),
      ),
    ),
    edges,
    boxes,
  );

  for (const n of nodes) {
    const to = pos.get(n.id);
    for (const pid of n.parents) {
      const from = pos.get(pid);
      if (!from) {
        // A parent before the shown window: a short stub says the edge exists.
        const x = PAD_X + to.lane * LANE_W + BOX_W / 2;
        const y = PAD_Y + to.row * ROW;
        edges.append(s("path", { d: `M${x},${y - 10} L${x},${y}`, class: "edge edge-stub" }));
        continue;
      }
      const parent = byId.get(pid);
      const version = n.resourceKey && parent && parent.resourceKey === n.resourceKey;
      edges.append(
        s("path", {
          d: edgePath(from, to),
          class: ["edge", version && "edge-version"],
          "marker-end": "url(#arrow)",
        }),
      );
    }
  }

  // Version number of each resource node among the nodes shown (v1 = oldest shown).
  // Shown only for keys with several versions in view.
  const seen = new Map();
  const version = new Map();
  for (const n of nodes) {
    if (!n.resourceKey) continue;
    seen.set(n.resourceKey, (seen.get(n.resourceKey) || 0) + 1);
    version.set(n.id, seen.get(n.resourceKey));
  }
  for (const n of nodes) {
    if (n.resourceKey && seen.get(n.resourceKey) < 2) version.delete(n.id);
  }

  const groups = new Map();
  for (const n of nodes) {
    const p = pos.get(n.id);
    const x = PAD_X + p.lane * LANE_W;
    const y = PAD_Y + p.row * ROW;
    const color = KIND_COLORS[n.kind] || "#475569";
    const head = heads.has(n.id);
    const title = `#${n.sequence} ${n.kind} ${n.id}${n.resourceKey ? "\n" + n.resourceKey : ""}`;
    const g = s(
      "g",
      {
        class: ["node", head && "node-head", isErased(n.payload) && "node-erased"],
        transform: `translate(${x},${y})`,
        tabindex: 0,
        role: "button",
        "data-node-id": n.id,
        "data-kind": n.kind,
        onclick: () => onSelect(n),
        onkeydown: (e) => {
          if (e.key === "Enter" || e.key === " ") {
            e.preventDefault();
            onSelect(n);
          }
        },
      },
      s("title", {}, title),
      s("rect", { class: "node-box", width: BOX_W, height: BOX_H, rx: 6, ry: 6 }),
      s("rect", { class: "node-stripe", width: 5, height: BOX_H, rx: 2, fill: color }),
      s("text", { class: "node-seq", x: 12, y: 14 }, `#${n.sequence}`),
      s("text", { class: "node-kind", x: 44, y: 14, fill: color }, n.kind.replace("_", " ")),
      s(
        "text",
        { class: "node-id", x: BOX_W - 8, y: 14, "text-anchor": "end" },
        version.has(n.id) ? `v${version.get(n.id)} · ${shortId(n.id)}` : shortId(n.id),
      ),
      s("text", { class: "node-summary", x: 12, y: 28 }, brief(summarize(n), 40)),
      head ? s("circle", { class: "head-dot", cx: BOX_W - 4, cy: 4, r: 4 }) : null,
    );
    groups.set(n.id, g);
    boxes.append(g);
  }

  function select(id) {
    for (const [nid, g] of groups) g.classList.toggle("node-selected", nid === id);
  }
  return { svg, select };
}
