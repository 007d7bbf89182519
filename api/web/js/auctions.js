// Auction-priced jobs: the open auctions (GET /auctions) and one job's auction
// (GET /jobs/{id}/auction): windows and counts while bids are sealed, every bid with the
// winner and price once cleared (docs/pricing.md).

import { get } from "./api.js";
import { el, shortAddress } from "./dom.js";
import { ntxText } from "./amounts.js";
import { isoMs, whenText } from "./when.js";

const $ = (id) => document.getElementById(id);

export async function showOpenAuctions() {
  const found = await get("/api/v1/auctions");
  const rows = $("auction-rows");
  if (!found.data.length) {
    rows.replaceChildren(el("tr", {}, el("td", { colspan: "5" }, "No auction is open now.")));
    return;
  }
  rows.replaceChildren(
    ...found.data.map((a) =>
      el(
        "tr",
        { "data-auction": a.job_id },
        el("td", {}, el("code", { title: a.job_id }, shortAddress(a.job_id))),
        el("td", {}, `${a.gpus} GPU × ${Math.round(a.gpu_memory_mb / 1024)} GB`),
        el("td", { class: "num" }, ntxText(a.reserve)),
        el("td", {}, a.phase === "bidding" ? `bids close ${whenText(isoMs(a.bids_close_at))}` : `reveals close ${whenText(isoMs(a.reveals_close_at))}`),
        el("td", { class: "num" }, String(a.commitments)),
      ),
    ),
  );
}

// Fills the job page's auction row for an auction-priced job; hides it otherwise.
export async function showAuction(jobId, pricing) {
  const label = $("job-auction-label");
  const box = $("job-auction");
  const auctioned = pricing && pricing.kind === "auction";
  label.hidden = box.hidden = !auctioned;
  if (!auctioned) return;
  const a = await get(`/api/v1/jobs/${jobId}/auction`);
  const facts = [];
  if (a.phase === "bidding") {
    facts.push(`Taking sealed bids until ${whenText(isoMs(a.bids_close_at))}: ${a.commitments} so far.`);
  } else if (a.phase === "revealing") {
    facts.push(`Bids are being revealed until ${whenText(isoMs(a.reveals_close_at))}: ${a.revealed} of ${a.commitments}.`);
  } else if (a.winner) {
    facts.push(`Won by ${shortAddress(a.winner)} at ${ntxText(a.price)} (reserve ${ntxText(a.reserve)}): ${a.reason}.`);
  } else {
    facts.push(`No winner: ${a.reason}.`);
  }
  const bids = (a.bids || []).map((b) =>
    el(
      "li",
      { "data-bid": b.bid.worker_key },
      el("code", { title: b.bid.worker_key }, shortAddress(b.bid.worker_key)),
      ` ${ntxText(b.bid.amount)}${b.bid.worker_key === a.winner ? " (winner)" : ""}`,
    ),
  );
  box.replaceChildren(el("span", { "data-phase": a.phase }, facts.join(" ")), ...(bids.length ? [el("ul", { class: "plain bids" }, ...bids)] : []));
}
