// NTX amounts as people read them: base units / 10^decimals (the API's /network says how
// many), or the base units themselves when the user asks for them (the "base units" toggle).

const PREF = "proofnet.baseUnits"; // a display preference, not state: kept in this browser

export const units = {
  ticker: "NTX",
  decimals: 6,
  base: localStorage.getItem(PREF) === "1",
};

export function setBaseUnits(on) {
  units.base = Boolean(on);
  localStorage.setItem(PREF, units.base ? "1" : "0");
}

const group = (digits) => digits.replace(/\B(?=(\d{3})+(?!\d))/g, ",");

// 2500000 -> "2.5" (decimals 6); "—" for null. Exact for any integer (BigInt).
export function ntxNumber(baseUnits) {
  if (baseUnits === null || baseUnits === undefined) return "—";
  const n = BigInt(baseUnits);
  if (units.base) return group(n.toString());
  const sign = n < 0n ? "-" : "";
  const abs = n < 0n ? -n : n;
  const scale = 10n ** BigInt(units.decimals);
  const whole = group((abs / scale).toString());
  const frac = units.decimals ? (abs % scale).toString().padStart(units.decimals, "0").replace(/0+$/, "") : "";
  return `${sign}${whole}${frac ? `.${frac}` : ""}`;
}

// "2.5 NTX" or "2,500,000 base units".
export function ntxText(baseUnits) {
  if (baseUnits === null || baseUnits === undefined) return "—";
  return `${ntxNumber(baseUnits)} ${units.base ? "base units" : units.ticker}`;
}

export const unitLabel = () => (units.base ? `${units.ticker} base units` : units.ticker);

// "2.5" -> 2500000 (a Number; the API's amounts fit). Throws with a readable reason.
export function parseNtx(text) {
  const t = String(text).trim().replaceAll(",", "");
  if (units.base) {
    if (!/^\d+$/.test(t)) throw new Error("a whole number of base units");
    return Number(t);
  }
  const m = /^(\d+)(?:\.(\d*))?$/.exec(t);
  if (!m) throw new Error(`a number of ${units.ticker}, like 2.5`);
  const frac = m[2] || "";
  if (frac.length > units.decimals) throw new Error(`at most ${units.decimals} decimals`);
  const value = BigInt(m[1]) * 10n ** BigInt(units.decimals) + BigInt(frac.padEnd(units.decimals, "0") || "0");
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error("too large");
  return Number(value);
}

export const ada = (lovelace) =>
  lovelace === null || lovelace === undefined ? "—" : (lovelace / 1e6).toLocaleString("en", { maximumFractionDigits: 6 });
