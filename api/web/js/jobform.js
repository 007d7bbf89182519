// The job form as a JobSpec (proofnet/messages/jobspec.py), checked the way the server
// checks it so most mistakes are caught before posting; the server still has the last word.
// The price is typed in NTX (with the network's decimals) unless base units are shown.

import { parseNtx } from "./amounts.js";

const IMAGE = /^(?:[A-Za-z0-9.-]+(?::[0-9]+)?\/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?@sha256:[0-9a-f]{64}$/;
const REPO = /^(?:https|ssh|git):\/\/[^\s/]+\/\S+$/;
const DATA_URI = /^[a-z][a-z0-9+.-]*:\/\/\S+$/;
const HEX40 = /^[0-9a-f]{40}$/;
const HEX64 = /^[0-9a-f]{64}$/;
const KINDS = ["json", "csv", "model"];
const MAX_SEED = 2n ** 64n - 1n;

// Split one command line into argv: whitespace separates, quotes group.
export function splitArgs(line) {
  const args = [];
  let current = "";
  let quote = null;
  let has = false;
  for (const ch of line) {
    if (quote) {
      if (ch === quote) quote = null;
      else current += ch;
    } else if (ch === '"' || ch === "'") {
      quote = ch;
      has = true;
    } else if (/\s/.test(ch)) {
      if (has || current) args.push(current);
      current = "";
      has = false;
    } else {
      current += ch;
      has = true;
    }
  }
  if (quote) throw new Error(`unclosed ${quote} in: ${line}`);
  if (has || current) args.push(current);
  return args;
}

function lines(text) {
  return text.split("\n").map((l) => l.trim()).filter(Boolean);
}

function integer(form, name, errors, label, min, max) {
  const raw = form.elements[name].value.trim();
  if (!/^\d+$/.test(raw)) {
    errors.push([name, `${label} must be a whole number`]);
    return 0;
  }
  const value = Number(raw);
  if (value < min || (max !== undefined && value > max) || !Number.isSafeInteger(value)) {
    errors.push([name, `${label} must be between ${min} and ${max ?? "2^53"}`]);
  }
  return value;
}

// Returns {spec, errors}: errors are [field name, message] pairs.
export function readJobForm(form) {
  const errors = [];
  const v = (name) => form.elements[name].value.trim();
  const repo = v("repo_url");
  if (!REPO.test(repo)) errors.push(["repo_url", "repository must be an https://, ssh:// or git:// URL"]);
  const commit = v("commit").toLowerCase();
  if (!HEX40.test(commit)) errors.push(["commit", "commit must be 40 lowercase hex digits"]);
  const image = v("image");
  if (!IMAGE.test(image)) errors.push(["image", "image must be pinned: name@sha256:<64 hex>"]);
  let commands = [];
  try {
    commands = lines(form.elements.commands.value).map(splitArgs);
  } catch (e) {
    errors.push(["commands", e.message]);
  }
  if (!commands.length) errors.push(["commands", "give at least one command"]);
  const gpus = integer(form, "gpus", errors, "GPUs", 0, 64);
  const gpuMem = integer(form, "gpu_memory_mb", errors, "GPU memory", 0);
  if (gpus === 0 && gpuMem !== 0) errors.push(["gpu_memory_mb", "GPU memory must be 0 without GPUs"]);
  const resources = {
    gpus,
    gpu_memory_mb: gpuMem,
    cpus: integer(form, "cpus", errors, "CPUs", 1, 1024),
    ram_mb: integer(form, "ram_mb", errors, "RAM", 1),
    disk_mb: integer(form, "disk_mb", errors, "disk", 1),
    max_duration_s: integer(form, "max_duration_s", errors, "max duration", 1),
  };
  const data = [];
  for (const line of lines(form.elements.data.value)) {
    const [uri, sha256, ...rest] = line.split(/\s+/);
    if (rest.length || !DATA_URI.test(uri || "") || !HEX64.test((sha256 || "").toLowerCase())) {
      errors.push(["data", `data line must be "scheme://… <64 hex sha256>": ${line.slice(0, 60)}`]);
    } else data.push({ uri, sha256: sha256.toLowerCase() });
  }
  const results = [];
  for (const line of lines(form.elements.results.value)) {
    const [path, kind, ...rest] = line.split(/\s+/);
    const parts = (path || "").split("/");
    const bad = !path || path.startsWith("/") || path.includes("\\") || parts.some((p) => ["", ".", ".."].includes(p));
    if (rest.length || bad || !KINDS.includes(kind)) {
      errors.push(["results", `result line must be "relative/glob json|csv|model": ${line.slice(0, 60)}`]);
    } else results.push({ path, kind });
  }
  let amount = 0;
  try {
    amount = parseNtx(v("amount"));
    if (amount < 1) errors.push(["amount", "price must be more than nothing"]);
  } catch (e) {
    errors.push(["amount", `price must be ${e.message}`]);
  }
  let pricing = { kind: "fixed", amount };
  if (v("pricing") === "auction") {
    const windowText = v("bid_window_s");
    const window = Number(windowText);
    if (!/^\d+$/.test(windowText) || window < 30 || window > 604800) {
      errors.push(["bid_window_s", "bid window must be 30 s to 7 days (604800 s)"]);
    }
    pricing = { kind: "auction", reserve: amount, bid_window_s: window };
  }
  const seedText = v("seed");
  let seed = 0;
  if (!/^\d+$/.test(seedText) || BigInt(seedText) > MAX_SEED) {
    errors.push(["seed", "seed must be a whole number below 2^64"]);
  } else if (BigInt(seedText) > BigInt(Number.MAX_SAFE_INTEGER)) {
    errors.push(["seed", "seed must be at most 2^53 - 1 in the browser"]);
  } else seed = Number(seedText);
  const spec = {
    model: { repo_url: repo, commit },
    framework: v("framework"),
    image,
    commands,
    resources,
    data,
    results,
    pricing,
    seed,
    egress: form.elements.egress.checked,
  };
  return { spec, errors };
}

export function randomSeed() {
  const words = new Uint32Array(2);
  crypto.getRandomValues(words);
  return String((words[0] & 0x1fffff) * 2 ** 32 + words[1]);
}
