// Before posting: the estimate of a spec (POST /estimates: time and NTX cost as ranges),
// the providers online with their GPUs and prices (GET /providers?online=true), and the
// storage providers' offers (GET /storage/offers: capacity free, price per GB-month).

import { get, post } from "./api.js";
import { el, shortAddress } from "./dom.js";
import { ntxText, unitLabel, ntxNumber } from "./amounts.js";
import { durationText } from "./when.js";

const $ = (id) => document.getElementById(id);

const span = (low, high, fmt) => (low > 0 && low !== high ? `${fmt(low)} – ${fmt(high)}` : low === high ? fmt(high) : `up to ${fmt(high)}`);

export async function showEstimate(spec) {
  const e = await post("/api/v1/estimates", { spec });
  const box = $("estimate");
  box.hidden = false;
  box.replaceChildren(
    el("dt", {}, "Time"),
    el("dd", { "data-estimate": "time" }, `${span(e.time_s.low, e.time_s.high, durationText)} (${e.basis})`),
    el("dt", {}, "Cost"),
    el("dd", { "data-estimate": "cost", "data-cap": String(e.cost.cap) }, `${span(e.cost.low, e.cost.high, ntxText)}; at most ${ntxText(e.cost.cap)} locked in escrow`),
    el("dt", {}, "Verification fee"),
    el(
      "dd",
      { "data-estimate": "verification-fee", "data-fee-high": String(e.cost.verification_fee.high) },
      `${span(e.cost.verification_fee.low, e.cost.verification_fee.high, ntxText)} of the cost: ${e.cost.verification_fee.basis}`,
    ),
    el("dt", {}, "Fits on"),
    el("dd", {}, e.gpu_models.length ? e.gpu_models.join(", ") : "no GPU model on the market yet"),
    ...(e.notes.length ? [el("dt", {}, "Notes"), el("dd", { class: "hint" }, e.notes.join(" "))] : []),
  );
  return e;
}

export async function showProviders() {
  const found = await get("/api/v1/providers?online=true");
  $("provider-unit").textContent = `${unitLabel()} per GPU-hour`;
  const rows = $("provider-rows");
  if (!found.data.length) {
    rows.replaceChildren(el("tr", {}, el("td", { colspan: "3" }, "No provider is online now.")));
    return;
  }
  rows.replaceChildren(
    ...found.data.map((p) => {
      const gpus = new Map();
      for (const g of p.gpus) gpus.set(g.model, (gpus.get(g.model) || 0) + 1);
      const rates = p.rate_card.length
        ? p.rate_card.map((r) => `${r.gpu_model}: ${ntxNumber(r.ntx_per_gpu_hour)}`).join("; ")
        : "no rate card";
      return el(
        "tr",
        { "data-provider": p.key_id },
        el("td", {}, el("code", { title: p.worker_key }, shortAddress(p.key_id))),
        el("td", {}, [...gpus].map(([m, n]) => `${n} × ${m}`).join(", ") || "CPU only"),
        el("td", { class: "num" }, rates),
      );
    }),
  );
}

const GB = 1e9;
const gbText = (bytes) => `${(bytes / GB).toLocaleString("en", { maximumFractionDigits: 1 })} GB`;
// The endpoint's host only: a path or query would only widen the column.
function hostOf(endpoint) {
  try {
    return new URL(endpoint).host;
  } catch {
    return endpoint;
  }
}

export async function showStorageOffers() {
  const found = await get("/api/v1/storage/offers");
  $("storage-unit").textContent = `${unitLabel()} per GB-month`;
  const rows = $("storage-rows");
  if (!found.data.length) {
    rows.replaceChildren(el("tr", {}, el("td", { colspan: "4" }, "No storage is offered now.")));
    return;
  }
  rows.replaceChildren(
    ...found.data.map((o) =>
      el(
        "tr",
        { "data-storage": o.provider_key },
        el("td", {}, el("code", { title: o.provider_key }, shortAddress(o.provider_key))),
        el("td", {}, el("code", { title: `${o.endpoint} (bucket ${o.bucket})` }, hostOf(o.endpoint))),
        el("td", { class: "num", "data-free": String(o.free_bytes) }, `${gbText(o.free_bytes)} of ${gbText(o.capacity_bytes)}`),
        el("td", { class: "num" }, ntxNumber(o.ntx_per_gb_month)),
      ),
    ),
  );
}
