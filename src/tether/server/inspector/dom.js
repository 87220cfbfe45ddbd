// Small DOM helpers. Everything shown comes from agents and users, so text is only
// ever set as text (never innerHTML): a stored "<script>" stays a string.

const SVG_NS = "http://www.w3.org/2000/svg";

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

function setProps(el, props, isSvg) {
  for (const [k, v] of Object.entries(props || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.setAttribute("class", Array.isArray(v) ? v.filter(Boolean).join(" ") : v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = String(v);
    else if (!isSvg && k in el && typeof v !== "string") el[k] = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
}

/** h("div", {class: "x", onclick: fn}, "text", child, [more]) */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  setProps(el, props, false);
  append(el, children);
  return el;
}

/** The same for SVG elements. */
export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setProps(el, props, true);
  append(el, children);
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function fill(el, ...children) {
  clear(el);
  append(el, children);
  return el;
}

export function bytes(n) {
  if (n === null || n === undefined) return "-";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

export function shortId(id) {
  return typeof id === "string" && id.startsWith("cw_") ? id.slice(3, 11) : String(id);
}

export function when(ts) {
  if (!ts) return "";
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? String(ts) : d.toLocaleString();
}

/** The time alone for today's timestamps, else the date and time (for table cells). */
export function whenShort(ts) {
  if (!ts) return "";
  const d = new Date(ts);
  if (Number.isNaN(d.getTime())) return String(ts);
  const today = d.toDateString() === new Date().toDateString();
  return today ? d.toLocaleTimeString() : d.toLocaleString();
}

/** A one-line rendering of any JSON value, cut at `max` characters. */
export function brief(value, max = 80) {
  let t;
  if (typeof value === "string") t = value;
  else if (value === undefined) t = "";
  else t = JSON.stringify(value);
  t = (t ?? "").replace(/\s+/g, " ").trim();
  return t.length > max ? t.slice(0, max - 1) + "…" : t;
}

export function pretty(value) {
  if (typeof value === "string") return value;
  return JSON.stringify(value, null, 2);
}

/**
 * A payload (or value) whose data key was destroyed: the server shows it as
 * {"$erased": true} (tether.crypto erasure); conversation messages say "[erased]".
 */
export function isErased(value) {
  return value !== null && typeof value === "object" && value["$erased"] === true;
}

export const ERASED_TEXT = "[erased]";

export function badge(text, kind) {
  return h("span", { class: ["badge", kind && `badge-${kind}`] }, text);
}

export function empty(text) {
  return h("p", { class: "empty" }, text);
}
