// A job's escrow as the API records it (GET /jobs/{id}/escrow): locked, or settled,
// refunded or cancelled by which transaction, with confirmations and explorer links; and
// the three ways money moves from here, each signed in the wallet (CIP-30 signTx):
// lock it, cancel (the whole escrow back at once while no provider has started), refund
// (after the deadline). Nothing is kept in the browser: another browser shows the same.

import { ApiError, get, post } from "./api.js";
import { el, shortAddress } from "./dom.js";
import { ada, ntxText } from "./amounts.js";
import { whenText, isoMs } from "./when.js";

const $ = (id) => document.getElementById(id);
const RECORD_TRIES = 60;
const ACTIONS = { settle: "Settled", refund: "Refunded", cancel: "Cancelled" };

function links(explorer) {
  return Object.entries(explorer || {}).flatMap(([name, url]) => [
    " ",
    el("a", { href: url, rel: "noopener noreferrer", target: "_blank", "data-explorer": name }, name),
  ]);
}

export class EscrowPanel {
  // ctx: { wallet(), notify(text, kind), job(), status(), refresh() }
  constructor(ctx) {
    this.ctx = ctx;
    this.state = null;
    this.skewMs = 0;
  }

  when(ms) {
    return whenText(ms, Date.now() + this.skewMs);
  }

  clear() {
    this.state = null;
    $("job-escrow").dataset.state = "";
    $("job-escrow").textContent = "…";
    $("escrow-hint").textContent = "";
  }

  async load(jobId) {
    const found = await get(`/api/v1/jobs/${jobId}/escrow`);
    if (this.ctx.job() !== jobId) return;
    // "in 3 h 10 min" counts from the API's clock, as its own messages do.
    this.skewMs = found.server_time_ms - Date.now();
    this.state = found;
    this.render();
  }

  render() {
    const e = this.state;
    const box = $("job-escrow");
    box.dataset.state = e ? e.state : "";
    if (!e) return;
    if (e.state === "none") {
      box.replaceChildren("not locked: lock it so a provider can take the job");
    } else {
      const parts = [
        el("span", { class: `escrow-state state-${e.state}` }, e.state),
        ` ${ntxText(e.budget)} in `,
        el("code", { id: "escrow-ref", title: `${e.tx_id}#${e.index}` }, `${e.tx_id}#${e.index}`),
        ...links(e.lock_explorer),
      ];
      if (["locked", "spent"].includes(e.state)) parts.push(el("br"), `deadline ${this.when(e.deadline_ms)}`);
      const c = e.closing;
      if (c) {
        const depth = c.confirmations === null ? "" : `, ${c.confirmations} confirmation${c.confirmations === 1 ? "" : "s"}`;
        parts.push(
          el("br"),
          el(
            "span",
            { id: "escrow-closing", "data-tx": c.tx_hash, "data-action": c.action },
            `${ACTIONS[c.action] || c.action} in `,
            el("code", { title: c.tx_hash }, shortAddress(c.tx_hash)),
            ` (block ${c.block_height}${depth}, ${this.when(isoMs(c.block_time))}): paid ${ntxText(c.paid_ntx)} to providers, returned ${ntxText(c.returned_ntx)}`,
            ...links(c.explorer),
          ),
        );
      }
      if (e.note) parts.push(el("br"), el("span", { class: "hint" }, e.note));
      box.replaceChildren(...parts);
    }
    this.sync();
  }

  // Which buttons make sense now; the reason for what does not, in the hint.
  sync() {
    const e = this.state;
    const terminal = ["completed", "failed", "cancelled", "stopped"].includes(this.ctx.status());
    const locked = e && e.state === "locked";
    $("lock-escrow").hidden = Boolean(e && e.state !== "none");
    $("lock-escrow").disabled = !e || terminal;
    $("refund-escrow").hidden = !locked;
    $("refund-escrow").disabled = !(locked && e.refund.possible);
    // Cancel: the job while it runs; the escrow while it is locked and no work started.
    $("cancel-job").disabled = terminal && !(locked && e.cancel.possible);
    $("cancel-job").textContent = locked && e.cancel.possible ? "Cancel and take the escrow back" : "Cancel job";
    const hints = [];
    if (locked) {
      hints.push(e.cancel.possible ? `Cancel: ${e.cancel.message}.` : `Cancel returns nothing now: ${e.cancel.message}.`);
      if (!e.refund.possible && e.cancel.possible) hints.push(`Refund: ${e.refund.message}.`);
      if (e.refund.possible) hints.push("Refund: the deadline has passed; take the escrow back in one click.");
    }
    $("escrow-hint").textContent = hints.join(" ");
  }

  async wallet() {
    const w = this.ctx.wallet();
    if (!w) throw new Error("connect the wallet you signed in with to sign");
    return { change_address: await w.changeAddress(), utxos: await w.utxos() };
  }

  async lock() {
    const jobId = this.ctx.job();
    this.ctx.notify("Building the escrow transaction…");
    const built = await post(`/api/v1/jobs/${jobId}/escrow/build`, await this.wallet());
    this.ctx.notify(`Sign in your wallet: lock ${ntxText(built.budget)} until ${whenText(built.deadline_ms)} (fee ${ada(built.fee_lovelace)} ADA).`);
    const witnessSet = await this.ctx.wallet().signTx(built.tx_cbor);
    const done = await post(`/api/v1/jobs/${jobId}/escrow/submit`, { tx_cbor: built.tx_cbor, witness_set: witnessSet });
    if (!done.recorded) {
      this.ctx.notify(`Escrow submitted in ${shortAddress(done.tx_id)}; waiting for the chain to confirm it…`);
      await this.recordWhenConfirmed(jobId, done.tx_id, done.escrow_index);
    }
    this.ctx.notify(`Escrow locked in transaction ${done.tx_id}.`);
    await this.load(jobId);
  }

  async recordWhenConfirmed(jobId, txId, index) {
    for (let i = 0; i < RECORD_TRIES; i++) {
      await new Promise((r) => setTimeout(r, 5000));
      try {
        await post(`/api/v1/jobs/${jobId}/escrow`, { tx_id: txId, index });
        return;
      } catch (e) {
        if (!(e instanceof ApiError) || e.status !== 400) throw e; // 400: not on chain yet
      }
    }
    throw new Error("the escrow transaction is not on chain yet; reload later to check");
  }

  // Cancel the job; while no provider has started it, the whole escrow comes back at once
  // through the cancel the oracles co-sign. Otherwise says when a refund is possible.
  async cancel() {
    const jobId = this.ctx.job();
    if (!["completed", "failed", "cancelled", "stopped"].includes(this.ctx.status())) {
      await post(`/api/v1/jobs/${jobId}/cancel`);
    }
    await this.load(jobId);
    const e = this.state;
    if (!e || e.state !== "locked") {
      this.ctx.notify("Job cancelled.");
      return;
    }
    if (!e.cancel.possible) {
      this.ctx.notify(`Job cancelled; the escrow stays locked: ${e.cancel.message}.`);
      return;
    }
    this.ctx.notify("Building the cancel; the oracles co-sign once your wallet has signed…");
    const built = await post(`/api/v1/jobs/${jobId}/escrow/cancel/build`, await this.wallet());
    const witnessSet = await this.ctx.wallet().signTx(built.tx_cbor);
    const done = await post(`/api/v1/jobs/${jobId}/escrow/cancel/submit`, { tx_cbor: built.tx_cbor, witness_set: witnessSet });
    this.ctx.notify(`Job cancelled: ${ntxText(e.budget)} comes back to ${shortAddress(built.returned_to)} in transaction ${done.tx_id}.`);
    await this.load(jobId);
  }

  async refund() {
    const jobId = this.ctx.job();
    const built = await post(`/api/v1/jobs/${jobId}/escrow/refund/build`, await this.wallet());
    this.ctx.notify(`Sign in your wallet: refund ${ntxText(this.state ? this.state.budget : null)} (fee ${ada(built.fee_lovelace)} ADA).`);
    const witnessSet = await this.ctx.wallet().signTx(built.tx_cbor);
    const done = await post(`/api/v1/jobs/${jobId}/escrow/refund/submit`, { tx_cbor: built.tx_cbor, witness_set: witnessSet });
    this.ctx.notify(`Refund submitted in transaction ${done.tx_id}.`);
    await this.load(jobId);
  }
}
