// The API client: JSON in and out, the bearer token from sign-in, errors as readable text.

const TOKEN_KEY = "proofnet.token";

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// FastAPI answers {"detail": "..."} or, for validation, {"detail": [{loc, msg}, ...]}.
export function describeError(body, status) {
  const detail = body && body.detail;
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail
      .map((d) => {
        const where = (d.loc || []).filter((p) => p !== "body").join(".");
        return where ? `${where}: ${d.msg}` : d.msg;
      })
      .join("; ");
  }
  return `request failed (HTTP ${status})`;
}

export async function request(method, path, body) {
  const headers = { Accept: "application/json" };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, `the API is unreachable: ${e.message}`);
  }
  if (response.status === 204) return null;
  let parsed = null;
  try {
    parsed = await response.json();
  } catch {
    parsed = null;
  }
  if (!response.ok) {
    if (response.status === 401) setToken(null);
    throw new ApiError(response.status, describeError(parsed, response.status));
  }
  return parsed;
}

export const get = (path) => request("GET", path);
export const post = (path, body = {}) => request("POST", path, body);

// Results are binary: fetched with the token, handed to the browser as a download.
export async function download(path, filename) {
  const response = await fetch(path, { headers: { Authorization: `Bearer ${token()}` } });
  if (!response.ok) {
    let parsed = null;
    try {
      parsed = await response.json();
    } catch {
      parsed = null;
    }
    throw new ApiError(response.status, describeError(parsed, response.status));
  }
  const url = URL.createObjectURL(await response.blob());
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
