// Times as people read them, as proofnet/when.py writes them: "2026-12-03 14:00 UTC
// (in 3 h 10 min)". Always UTC and relative to now; never slots.

const UNITS = [
  ["d", 86400],
  ["h", 3600],
  ["min", 60],
  ["s", 1],
];

const pad = (n) => String(n).padStart(2, "0");

export function utcText(ms) {
  const d = new Date(ms);
  const base = `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`;
  return d.getUTCSeconds() ? `${base}:${pad(d.getUTCSeconds())} UTC` : `${base} UTC`;
}

// "3 h 10 min": the two largest units that are not zero.
export function durationText(seconds) {
  let left = Math.floor(Math.abs(seconds));
  const parts = [];
  for (const [name, size] of UNITS) {
    const count = Math.floor(left / size);
    left -= count * size;
    if (count || (parts.length && parts.length < 2)) parts.push([count, name]);
    if (parts.length === 2) break;
  }
  const shown = parts.filter(([count]) => count).map(([count, name]) => `${count} ${name}`);
  return shown.length ? shown.join(" ") : "0 s";
}

export function relativeText(ms, nowMs = Date.now()) {
  const seconds = (ms - nowMs) / 1000;
  if (Math.abs(seconds) < 1) return "now";
  const text = durationText(seconds);
  return seconds > 0 ? `in ${text}` : `${text} ago`;
}

export function whenText(ms, nowMs = Date.now()) {
  return `${utcText(ms)} (${relativeText(ms, nowMs)})`;
}

// ISO times from the API ("...Z", or naive from SQLite, which the API stores as UTC).
export function isoMs(iso) {
  if (!iso) return NaN;
  return Date.parse(/[zZ]|[+-]\d\d:\d\d$/.test(iso) ? iso : `${iso}Z`);
}
