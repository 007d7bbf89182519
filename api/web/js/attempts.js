// A job's attempts and its result destinations on the job page: for a job that resumed
// after a lost provider, who ran which segments of the proof and what each claims
// (GET /jobs/{id} `history`, docs/protocol.md "Long jobs resume"); for a spec that names
// destinations, whether each acknowledged the results (GET /jobs/{id}/deliveries).

import { get } from "./api.js";
import { el } from "./dom.js";
import { ntxText } from "./amounts.js";

const $ = (id) => document.getElementById(id);

const segments = (h) =>
  h.proved ? `${h.first_segment}–${h.last_segment === null ? "end" : h.last_segment}` : "none";

function claims(h) {
  if (h.claimed !== null && h.claimed !== undefined) return ntxText(h.claimed);
  return h.proved && h.outcome && h.outcome !== "completed" ? "not paid" : "—";
}

// Shown once an attempt resumed another (a job run once has nothing to tell here).
export function showAttempts(job) {
  const history = job.history || [];
  const box = $("job-history");
  box.hidden = !history.some((h) => h.resumed_from_attempt !== null);
  if (box.hidden) return;
  $("history-rows").replaceChildren(
    ...history.map((h) =>
      el(
        "tr",
        { "data-attempt": String(h.attempt) },
        el("td", { class: "num" }, String(h.attempt)),
        el("td", {}, h.provider ? el("code", { title: h.provider }, `${h.provider.slice(0, 6)}…`) : "—"),
        el(
          "td",
          {},
          h.outcome || "running",
          h.resumed_from_attempt !== null
            ? el("span", { class: "resumed" }, `resumed attempt ${h.resumed_from_attempt} at checkpoint ${h.resumed_at}`)
            : "",
        ),
        el("td", { "data-segments": segments(h) }, segments(h)),
        el("td", { class: "num" }, claims(h)),
      ),
    ),
  );
}

// Shown when the spec names destinations: each one's kind and answer.
export async function showDeliveries(jobId, job) {
  const box = $("job-deliveries");
  box.hidden = !(job.spec && job.spec.destinations && job.spec.destinations.length);
  if (box.hidden) return true;
  const view = await get(`/api/v1/jobs/${jobId}/deliveries`);
  $("delivery-rows").replaceChildren(
    ...view.data.map((d) =>
      el(
        "tr",
        { "data-destination": String(d.index), "data-state": d.state },
        el("td", { class: "num" }, String(d.index)),
        el("td", {}, d.kind),
        el("td", { class: `delivery-${d.state}` }, d.state),
        el("td", {}, d.reason || ""),
      ),
    ),
  );
  $("deliveries-complete").textContent = view.complete
    ? "Every destination acknowledged the results."
    : "Not every destination has acknowledged yet: the API's store before the job completes, " +
      "your own destinations once the oracles' verdict releases the results.";
  return view.complete;
}
