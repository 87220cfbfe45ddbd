// The inspector's only way to the server: the same HTTP API any client uses, with
// the token the person typed in (kept in sessionStorage, gone with the tab).

export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.code = body && body.code ? body.code : "http";
    this.body = body;
  }
}

const TOKEN_KEY = "tether.inspector.token";

export class Api {
  constructor() {
    this.token = sessionStorage.getItem(TOKEN_KEY) || "";
  }

  setToken(token) {
    this.token = token;
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  }

  async request(method, path, { params, body } = {}) {
    const url = new URL(path, window.location.origin);
    for (const [k, v] of Object.entries(params || {})) {
      if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, String(v));
    }
    const headers = { Authorization: `Bearer ${this.token}` };
    const init = { method, headers, cache: "no-store" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const resp = await fetch(url, init);
    const text = await resp.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = { message: text };
    }
    if (!resp.ok) throw new ApiError(resp.status, data);
    return data;
  }

  get(path, params) {
    return this.request("GET", path, { params });
  }

  post(path, body, params) {
    return this.request("POST", path, { body, params });
  }

  del(path, params) {
    return this.request("DELETE", path, { params });
  }

  ns(namespace, rest) {
    return `/v1/ns/${encodeURIComponent(namespace)}${rest}`;
  }

  thread(namespace, thread, rest = "") {
    return this.ns(namespace, `/threads/${encodeURIComponent(thread)}${rest}`);
  }
}
