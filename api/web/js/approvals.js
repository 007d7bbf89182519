// Submitter approval in the page: an applicant's progress ("2 of 5 endorsements, by ..."),
// and, for senior members, the applications waiting for endorsements, each endorsed with a
// CIP-8 signature (CIP-30 signData) over its endorsement message.
//
// The message is rebuilt here (proofnet/messages/endorsement.py) and must equal the one the
// API sent, so the API cannot get the wallet to sign anything but the endorsement of the
// application shown, on the wallet's kind of network.

import { get, post } from "./api.js";
import { el, shortAddress } from "./dom.js";

const $ = (id) => document.getElementById(id);
const NETWORKS = ["devnet", "preprod", "preview", "mainnet"];

export function endorsementMessage(network, applicant, id) {
  return (
    "proofnet endorsement v1\n" +
    `network: ${network}\n` +
    `applicant: ${applicant}\n` +
    `application: ${id}\n` +
    "I vouch that this applicant may submit training jobs."
  );
}

// "2 of 5 endorsements, by addr_test1…, addr_test1…" as nodes (full addresses in titles).
export function progressNodes(application) {
  const count = `${application.endorsements} of ${application.endorsements_required} endorsements`;
  const by = application.endorsers || [];
  if (!by.length) return [count];
  const names = by.flatMap((e, i) => [
    i ? ", " : "",
    el("code", { title: e.address, "data-endorser": e.address }, shortAddress(e.address)),
  ]);
  return [`${count}, by `, ...names];
}

function checkMessage(application, walletNetworkId) {
  const stated = /^proofnet endorsement v1\nnetwork: ([a-z]+)\n/.exec(application.endorsement_message || "");
  const network = stated && stated[1];
  if (
    !network ||
    !NETWORKS.includes(network) ||
    application.endorsement_message !== endorsementMessage(network, application.applicant, application.id)
  ) {
    throw new Error("the API asked to sign something other than this application's endorsement; nothing was signed");
  }
  if ((network === "mainnet") !== (walletNetworkId === 1)) {
    throw new Error(`the wallet is on another network than this API (${network}); nothing was signed`);
  }
}

export class Approvals {
  // ctx: { wallet(), address(), me(), notify(text), fail(error), busy(button, action) }
  constructor(ctx) {
    this.ctx = ctx;
    $("refresh-approvals").addEventListener("click", (e) => ctx.busy(e.currentTarget, () => this.load()));
  }

  hide() {
    $("approvals").hidden = true;
    $("approval-rows").replaceChildren();
  }

  async load() {
    const me = this.ctx.me();
    if (!me || !me.is_senior) {
      this.hide();
      return;
    }
    $("approvals").hidden = false;
    const pending = await get("/api/v1/approvals/pending");
    const rows = $("approval-rows");
    if (!pending.data.length) {
      rows.replaceChildren(el("li", { class: "empty" }, "No applications are waiting."));
      return;
    }
    rows.replaceChildren(...pending.data.map((a) => this.row(a, me)));
  }

  row(application, me) {
    const own = application.applicant_key_hash === me.payment_key_hash;
    const endorsed = (application.endorsers || []).some((e) => e.key_hash === me.payment_key_hash);
    const button = el(
      "button",
      { type: "button", "data-endorse": String(application.id) },
      endorsed ? "Endorsed" : own ? "Your own key" : "Endorse",
    );
    button.disabled = own || endorsed;
    button.addEventListener("click", () => this.ctx.busy(button, () => this.endorse(application)));
    const statement = application.statement ? [el("p", { class: "statement" }, application.statement)] : [];
    return el(
      "li",
      { "data-application": String(application.id) },
      el(
        "p",
        { class: "who" },
        `#${application.id} `,
        el("code", { title: application.applicant }, shortAddress(application.applicant)),
        ` applied ${new Date(application.created_at).toLocaleDateString()}`,
      ),
      ...statement,
      el("p", { class: "progress", "data-progress": String(application.endorsements) }, ...progressNodes(application)),
      button,
    );
  }

  async endorse(application) {
    const wallet = this.ctx.wallet();
    if (!wallet) throw new Error("connect the wallet you signed in with to endorse");
    checkMessage(application, await wallet.networkId());
    const signed = await wallet.signMessage(this.ctx.address(), application.endorsement_message);
    const after = await post(`/api/v1/approvals/${application.id}/endorsements`, signed);
    this.ctx.notify(
      after.approved
        ? `Endorsed #${after.id}: the applicant is now an approved submitter.`
        : `Endorsed #${after.id}: ${after.endorsements} of ${after.endorsements_required} endorsements.`,
    );
    await this.load();
  }
}

// The applicant's side: what #account-approved says while the application is pending.
export function applicationStatus(application) {
  if (application.approved) return ["approved"];
  return ["applied; ", ...progressNodes(application)];
}
