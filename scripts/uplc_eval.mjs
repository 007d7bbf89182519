// Evaluate a transaction's redeemers with Aiken's evaluator (@lucid-evolution/uplc, WASM).
//
// Test-only: the devnet's Python evaluator is cross-checked against this independent one
// (chain/devnet/differential.py). Reads one JSON object on stdin:
//   {"tx": hex, "inputs": [hex], "outputs": [hex], "cost_models": hex,
//    "budget": {"mem": n, "steps": n},
//    "slot_config": {"zero_time_ms": n, "zero_slot": n, "slot_length_ms": n}}
// and prints {"ok": true, "redeemers": [{"tag", "index", "mem", "steps", "cbor"}]}
// or {"ok": false, "error": "..."} (a failing script makes Aiken throw its trace).
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const TAGS = ["spend", "mint", "cert", "reward", "vote", "propose"];

function fromHex(hex) {
  if (typeof hex !== "string" || hex.length % 2 !== 0 || /[^0-9a-fA-F]/.test(hex)) {
    throw new Error(`not a hex string: ${String(hex).slice(0, 40)}`);
  }
  return Uint8Array.from(Buffer.from(hex, "hex"));
}

// Minimal CBOR reader: enough to read [tag, index, data, [mem, steps]].
function readHead(buf, pos) {
  const major = buf[pos] >> 5;
  const info = buf[pos] & 0x1f;
  if (info < 24) return { major, info, value: BigInt(info), pos: pos + 1 };
  const sizes = { 24: 1, 25: 2, 26: 4, 27: 8 };
  if (info === 31) return { major, info, value: -1n, pos: pos + 1 };
  const size = sizes[info];
  if (size === undefined) throw new Error(`bad CBOR head at ${pos}`);
  let value = 0n;
  for (let i = 1; i <= size; i++) value = (value << 8n) | BigInt(buf[pos + i]);
  return { major, info, value, pos: pos + 1 + size };
}

function skip(buf, pos) {
  const h = readHead(buf, pos);
  if (h.major === 7 || h.major === 0 || h.major === 1) return h.pos;
  if (h.info === 31) {
    let p = h.pos;
    while (buf[p] !== 0xff) p = h.major === 5 ? skip(buf, skip(buf, p)) : skip(buf, p);
    return p + 1;
  }
  if (h.major === 2 || h.major === 3) return h.pos + Number(h.value);
  if (h.major === 4) {
    let p = h.pos;
    for (let i = 0n; i < h.value; i++) p = skip(buf, p);
    return p;
  }
  if (h.major === 5) {
    let p = h.pos;
    for (let i = 0n; i < h.value; i++) p = skip(buf, skip(buf, p));
    return p;
  }
  return skip(buf, h.pos); // tag
}

function readRedeemer(bytes) {
  const buf = Buffer.from(bytes);
  const arr = readHead(buf, 0);
  if (arr.major !== 4) throw new Error("redeemer is not an array");
  const tag = readHead(buf, arr.pos);
  const index = readHead(buf, tag.pos);
  const afterData = skip(buf, index.pos);
  const units = readHead(buf, afterData);
  const mem = readHead(buf, units.pos);
  const steps = readHead(buf, mem.pos);
  return {
    tag: TAGS[Number(tag.value)],
    index: Number(index.value),
    mem: mem.value.toString(),
    steps: steps.value.toString(),
    cbor: buf.toString("hex"),
  };
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

async function main() {
  let uplc;
  try {
    uplc = require("@lucid-evolution/uplc");
  } catch (err) {
    process.stdout.write(JSON.stringify({ ok: false, missing: true, error: String(err) }));
    process.exitCode = 3;
    return;
  }
  const req = JSON.parse(await readStdin());
  let result;
  try {
    const raw = uplc.eval_phase_two_raw(
      fromHex(req.tx),
      req.inputs.map(fromHex),
      req.outputs.map(fromHex),
      fromHex(req.cost_models),
      BigInt(req.budget.steps),
      BigInt(req.budget.mem),
      BigInt(req.slot_config.zero_time_ms),
      BigInt(req.slot_config.zero_slot),
      Number(req.slot_config.slot_length_ms),
    );
    result = { ok: true, redeemers: raw.map(readRedeemer) };
  } catch (err) {
    result = { ok: false, error: typeof err === "string" ? err : String(err?.message ?? err) };
  }
  // mem/steps travel as strings: they can exceed 2^53.
  process.stdout.write(JSON.stringify(result));
}

main().catch((err) => {
  process.stdout.write(JSON.stringify({ ok: false, error: `uplc_eval.mjs: ${err}` }));
  process.exitCode = 2;
});
