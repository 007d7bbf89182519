// Before posting: the estimate of a spec (POST /estimates: time and NTX cost as ranges) and
// the providers online with their GPUs and prices (GET /providers?online=true).

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
