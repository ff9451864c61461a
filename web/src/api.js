// The dispatcher's HTTP API (docs/api.md). Requests carry the HttpOnly session cookie set by
// POST /api/v1/session; the API key itself is never stored by the page.

/** ApiError is a structured error answer: {code, message, troubleshooting, context}. */
export class ApiError extends Error {
  constructor(status, body) {
    super(body?.message || `HTTP ${status}`);
    this.status = status;
    this.code = body?.code || (status === 0 ? 'NETWORK_ERROR' : 'HTTP_' + status);
    this.troubleshooting = body?.troubleshooting || [];
    this.context = body?.context || {};
  }
  /** fields maps a top-level field name to its messages (context.fields of VALIDATION_FAILED). */
  fields() {
    const out = {};
    for (const f of this.context.fields || []) {
      const top = String(f.field).split(/[.[]/)[0];
      (out[top] ||= []).push(f.field === top ? f.message : `${f.field}: ${f.message}`);
    }
    return out;
  }
}

let onUnauthenticated = () => {};
/** setUnauthenticatedHandler is called when any request answers 401. */
export function setUnauthenticatedHandler(fn) { onUnauthenticated = fn; }

/** api sends a JSON request and returns the decoded answer or throws ApiError. */
export async function api(method, path, body) {
  let res;
  try {
    res = await fetch('/api/v1' + path, {
      method,
      credentials: 'same-origin',
      headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, { message: 'The dispatcher could not be reached: ' + e.message });
  }
  const text = await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = { message: text }; }
  }
  if (!res.ok) {
    const err = new ApiError(res.status, data);
    if (res.status === 401 && path !== '/session') onUnauthenticated(err);
    throw err;
  }
  return data;
}

/** query builds a query string from the non-empty entries of an object. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? '?' + s : '';
}
