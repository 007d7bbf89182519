// The page: choose a CIP-30 wallet (checked against the API's network), sign in, see
// balances, estimate and post jobs, lock, cancel or refund their escrow, follow them.
// Every state shown comes from the API; the browser keeps only the session token and
// display preferences.

import { ApiError, download, get, post, setToken, token } from "./api.js";
import { Approvals, applicationStatus } from "./approvals.js";
import { ada, ntxNumber, ntxText, setBaseUnits, unitLabel, units } from "./amounts.js";
import { el } from "./dom.js";
import { EscrowPanel } from "./escrow.js";
import { randomSeed, readJobForm } from "./jobform.js";
import { showEstimate, showProviders, showStorageOffers } from "./market.js";
import { showAuction, showOpenAuctions } from "./auctions.js";
import { showAttempts, showDeliveries } from "./attempts.js";
import { ConnectedWallet, availableWallets } from "./wallet.js";
import { isoMs, whenText } from "./when.js";

const $ = (id) => document.getElementById(id);
const POLL_MS = 2000;
// A job's attempts and destinations are read again at least every this many ticks.
const DETAIL_POLL_TICKS = 5;
// While a finished job's escrow is still locked, it is looked at this often (refund opens).
const ESCROW_POLL_TICKS = 5;
const TERMINAL = ["completed", "failed", "cancelled", "stopped"];

const state = {
  network: null,
  wallet: null,
  walletName: "",
  address: sessionStorage.getItem("proofnet.address"),
  me: null,
  job: null,
  pricing: null,
  status: null,
  logCursor: 0,
  poll: null,
  ticks: 0,
  resultsReleased: false,
  deliveriesDone: false,
};

function notify(text, kind = "ok") {
  const box = $("notice");
  box.textContent = text;
  box.className = `notice ${kind}`;
  box.hidden = false;
}

function fail(e) {
  notify(e instanceof Error ? e.message : String(e), "error");
  if (e instanceof ApiError && e.status === 401) showSignedOut();
}

// Disable a button while its action runs, so a double click cannot sign twice.
async function busy(button, action) {
  button.disabled = true;
  try {
    await action();
  } catch (e) {
    fail(e);
  } finally {
    button.disabled = false;
    escrow.sync();
  }
}

const shortId = (id) => `${id.slice(0, 10)}…${id.slice(-6)}`;

// --- network and units -------------------------------------------------------------------

async function loadNetwork() {
  const n = await get("/api/v1/network");
  state.network = n;
  units.ticker = n.ntx.ticker;
  units.decimals = n.ntx.decimals;
  const badge = $("network-badge");
  badge.textContent = n.network;
  badge.dataset.network = n.network;
  badge.title = `This API settles on ${n.network} (${n.network_id === 1 ? "mainnet" : "a test network"}); wallets must be on it too`;
  showUnits();
}

function showUnits() {
  $("units-toggle").checked = units.base;
  $("ntx-head").textContent = unitLabel();
  $("budget-head").textContent = `Budget (${unitLabel()})`;
  $("price-unit").textContent = unitLabel();
}

async function toggleUnits(on) {
  // The price typed so far keeps its value in the new unit.
  const input = $("f-price");
  let price = null;
  try {
    const pricing = readJobForm($("job-form")).spec.pricing;
    price = pricing.amount ?? pricing.reserve;
  } catch {
    price = null;
  }
  setBaseUnits(on);
  showUnits();
  if (price) input.value = ntxNumber(price).replaceAll(",", "");
  escrow.render();
  await Promise.all([loadBalances(), loadJobs(), showProviders(), showStorageOffers()]);
}

// --- wallet and sign-in -------------------------------------------------------------

function listWallets() {
  const found = availableWallets();
  const list = $("wallet-list");
  list.replaceChildren(
    ...found.map((w) =>
      el(
        "li",
        {},
        el(
          "button",
          {
            type: "button",
            class: "wallet-choice secondary",
            "data-wallet": w.id,
            "aria-pressed": String(state.wallet !== null && state.wallet.id === w.id),
            onclick: (e) => busy(e.currentTarget, () => connect(w)),
          },
          ...(w.icon ? [el("img", { src: w.icon, alt: "", width: "20", height: "20" })] : []),
          w.name,
        ),
      ),
    ),
  );
  $("wallet-hint").textContent = found.length ? "" : "No CIP-30 wallet found in this browser.";
}

async function connect(choice) {
  const wallet = await ConnectedWallet.connect(choice.id);
  const wanted = state.network ? state.network.network_id : null;
  const has = await wallet.networkId();
  const badge = $("network-badge");
  if (wanted !== null && has !== wanted) {
    badge.classList.add("bad");
    badge.classList.remove("good");
    throw new Error(
      `${choice.name} is on ${has === 1 ? "mainnet" : "a test network"}, but this API settles on ` +
        `${state.network.network}: switch the wallet's network, then choose it again. Nothing was signed.`,
    );
  }
  badge.classList.add("good");
  badge.classList.remove("bad");
  state.wallet = wallet;
  state.walletName = choice.name;
  state.address = await wallet.address();
  sessionStorage.setItem("proofnet.address", state.address);
  $("account-address").textContent = state.address;
  $("sign-in").hidden = Boolean(state.me);
  listWallets();
  notify(state.me ? `Connected ${choice.name}.` : `Connected ${choice.name}. Sign in to continue.`);
}

async function signIn() {
  if (!state.wallet) throw new Error("choose a wallet first");
  const challenge = await post("/api/v1/auth/challenge", { address: state.address });
  const signed = await state.wallet.signMessage(state.address, challenge.message);
  const issued = await post("/api/v1/auth/verify", {
    address: state.address,
    nonce: challenge.nonce,
    signature: signed.signature,
    key: signed.key,
  });
  setToken(issued.access_token);
  notify("Signed in.");
  await loadAccount();
}

async function signOut() {
  try {
    await post("/api/v1/auth/logout");
  } catch {
    // signed out locally either way
  }
  setToken(null);
  showSignedOut();
}

function showSignedOut() {
  stopPolling();
  state.me = null;
  $("account-signed-in").textContent = "no";
  $("account-approved").textContent = "—";
  $("sign-out").hidden = true;
  $("sign-in").hidden = !state.wallet;
  $("apply-form").hidden = true;
  $("refresh-application").hidden = true;
  approvals.hide();
  $("job").hidden = true;
  $("balance-rows").replaceChildren(el("tr", {}, el("td", { colspan: "3" }, "Sign in to see your balances.")));
  $("job-rows").replaceChildren(el("tr", {}, el("td", { colspan: "4" }, "Sign in to see your jobs.")));
}

async function loadAccount() {
  state.me = await get("/api/v1/users/me");
  state.address = state.me.address;
  $("account-address").textContent = state.me.address;
  $("account-signed-in").textContent = "yes";
  $("account-approved").textContent = state.me.is_approved ? "approved" : "not approved yet";
  $("sign-in").hidden = true;
  $("sign-out").hidden = false;
  $("apply-form").hidden = state.me.is_approved;
  $("refresh-application").hidden = true;
  if (!state.me.is_approved) {
    try {
      const application = await get("/api/v1/approvals/me");
      $("account-approved").replaceChildren(...applicationStatus(application));
      $("apply-form").hidden = true;
      $("refresh-application").hidden = application.approved;
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) throw e;
    }
  }
  await Promise.all([loadBalances(), loadJobs(), approvals.load()]);
}

async function apply(event) {
  event.preventDefault();
  await post("/api/v1/approvals", { statement: $("apply-statement").value });
  notify("Application sent; senior members will endorse it.");
  await loadAccount();
}

// --- balances ----------------------------------------------------------------------------

async function loadBalances() {
  if (!state.me) return;
  const rows = $("balance-rows");
  let b;
  try {
    b = await get(`/api/v1/balances/${encodeURIComponent(state.me.address)}`);
  } catch (e) {
    const why = e instanceof ApiError && e.status === 404 ? "this API has no balances endpoint" : e.message;
    rows.replaceChildren(el("tr", {}, el("td", { colspan: "3" }, `Balances unavailable: ${why}`)));
    return;
  }
  const line = (label, amount, key) =>
    el(
      "tr",
      { "data-balance": key },
      el("th", { scope: "row", title: amount.note || "" }, label),
      el("td", { class: "num" }, ada(amount.lovelace)),
      // data-ntx: base units, whatever is shown.
      el("td", { class: "num", "data-ntx": String(amount.ntx ?? "") }, ntxNumber(amount.ntx)),
    );
  const lines = [
    line("Available", b.available, "available"),
    line("In escrow", b.in_escrow, "in_escrow"),
    line("Earned", b.earned, "earned"),
    line("Pending settlement", b.pending_settlement, "pending_settlement"),
    line("Refunded", b.refunded, "refunded"),
  ];
  if (b.slashed && b.slashed.ntx) lines.push(line("Slashed", b.slashed, "slashed"));
  rows.replaceChildren(...lines);
  const notes = [b.available, b.in_escrow, b.earned, b.pending_settlement]
    .map((a) => a.note)
    .filter(Boolean);
  $("balances-note").textContent = notes.join(" ");
  showMovements($("payouts"), b.payouts, "for job");
  showMovements($("refunds"), b.refunds || [], "back from job");
}

// Payouts and refunds as the API's chain watcher recorded them: each with its transaction,
// block and confirmations, and explorer links.
function showMovements(list, movements, verb) {
  if (!movements.length) {
    list.replaceChildren(el("li", {}, "None yet."));
    return;
  }
  const what = { settle: "settlement", refund: "refund", cancel: "cancel", slash: "slash" };
  list.replaceChildren(
    ...movements.map((m) => {
      const depth =
        m.confirmations === null || m.confirmations === undefined
          ? ""
          : `, ${m.confirmations} confirmation${m.confirmations === 1 ? "" : "s"}`;
      return el(
        "li",
        { "data-tx": m.tx_hash, "data-kind": m.kind },
        `${ntxText(m.amount)} ${verb} `,
        el("code", {}, m.job_id ? shortId(m.job_id) : "—"),
        ` (${what[m.action] || m.action}) ${whenText(isoMs(m.confirmed_at))}, tx `,
        el("code", { title: m.tx_hash }, shortId(m.tx_hash)),
        ` in block ${m.block_height}${depth}`,
        ...Object.entries(m.explorer).flatMap(([name, url]) => [
          " ",
          el("a", { href: url, rel: "noopener noreferrer", target: "_blank" }, name),
        ]),
      );
    }),
  );
}

// --- jobs ------------------------------------------------------------------------------

async function loadJobs() {
  if (!state.me) return;
  const list = await get("/api/v1/jobs?limit=50");
  const rows = $("job-rows");
  if (!list.data.length) {
    rows.replaceChildren(el("tr", {}, el("td", { colspan: "4" }, "No jobs yet.")));
    return;
  }
  rows.replaceChildren(
    ...list.data.map((job) => {
      const open = () => selectJob(job.job_id).catch(fail);
      const p = job.spec.pricing;
      const price = p.amount ?? p.max_amount ?? p.reserve;
      return el(
        "tr",
        { "data-job": job.job_id, "aria-selected": String(state.job === job.job_id) },
        el("td", {}, el("button", { type: "button", class: "secondary", onclick: open }, shortId(job.job_id))),
        el("td", { class: `status-${job.status}` }, job.status),
        el("td", { class: "num" }, ntxNumber(price)),
        el("td", {}, whenText(isoMs(job.created_at))),
      );
    }),
  );
}

function markInvalid(form, errors) {
  for (const input of form.querySelectorAll("[aria-invalid]")) input.removeAttribute("aria-invalid");
  for (const [name] of errors) form.elements[name]?.setAttribute("aria-invalid", "true");
  $("form-errors").replaceChildren(...errors.map(([, msg]) => el("li", {}, msg)));
}

// The form's spec, or null with the errors shown next to it.
function checkedSpec() {
  const form = $("job-form");
  const { spec, errors } = readJobForm(form);
  markInvalid(form, errors);
  if (errors.length) {
    form.elements[errors[0][0]]?.focus();
    return null;
  }
  return spec;
}

async function estimateJob() {
  const spec = checkedSpec();
  if (!spec) return;
  if (!state.me) throw new Error("sign in to estimate a job");
  try {
    await showEstimate(spec);
  } catch (e) {
    $("form-errors").replaceChildren(el("li", {}, `No estimate: ${e.message}`));
  }
}

async function postJob(event) {
  event.preventDefault();
  const spec = checkedSpec();
  if (!spec) return;
  if (!state.me) throw new Error("sign in before posting a job");
  let job;
  try {
    job = await post("/api/v1/jobs", { spec });
  } catch (e) {
    $("form-errors").replaceChildren(el("li", {}, `The server refused the job: ${e.message}`));
    return;
  }
  $("f-seed").value = randomSeed();
  notify(`Job ${shortId(job.job_id)} posted. Lock its escrow so a provider can take it.`);
  await loadJobs();
  await selectJob(job.job_id);
}

async function selectJob(jobId) {
  stopPolling();
  state.job = jobId;
  state.status = null;
  state.logCursor = 0;
  state.ticks = 0;
  state.resultsReleased = state.deliveriesDone = false;
  $("job").hidden = false;
  $("job-id").textContent = jobId;
  $("job-logs").textContent = "";
  escrow.clear();
  for (const row of document.querySelectorAll("#job-rows tr[data-job]")) {
    row.setAttribute("aria-selected", String(row.dataset.job === jobId));
  }
  state.pricing = (await get(`/api/v1/jobs/${jobId}`)).spec.pricing;
  $("job-history").hidden = $("job-deliveries").hidden = true;
  await refreshJob();
  state.poll = setInterval(() => refreshJob().catch(fail), POLL_MS);
}

function stopPolling() {
  if (state.poll) clearInterval(state.poll);
  state.poll = null;
}

async function refreshJob() {
  const jobId = state.job;
  if (!jobId) return;
  state.ticks += 1;
  const terminalBefore = TERMINAL.includes(state.status);
  if (terminalBefore) {
    // The job is over: only its escrow can still change (a refund opens, a settlement lands).
    const e = escrow.state;
    if (state.ticks % ESCROW_POLL_TICKS === 0 && e && ["locked", "spent"].includes(e.state)) {
      await escrow.load(jobId);
    }
    // The oracles' verdict comes after the job ends: the results (and the submitter's own
    // destinations) wait for it.
    if (state.ticks % DETAIL_POLL_TICKS === 1) {
      if (!state.resultsReleased) await showResults(jobId);
      if (!state.deliveriesDone && state.job === jobId) {
        const job = await get(`/api/v1/jobs/${jobId}`);
        if (state.job === jobId) state.deliveriesDone = await showDeliveries(jobId, job);
      }
    }
    return;
  }
  const st = await get(`/api/v1/jobs/${jobId}/status`);
  if (state.job !== jobId) return;
  $("job-status").textContent = st.status;
  $("job-status").className = `status-${st.status}`;
  $("job-reason").textContent = st.reason;
  $("job-progress").value = st.progress;
  $("job-progress-text").textContent = `${Math.round(st.progress * 100)}% ${st.progress_message}`;
  const changed = st.status !== state.status;
  state.status = st.status;
  // The attempts and destinations change with the job's state (a lease ends, a destination
  // answers): read them when it changes, and every few ticks besides, not on every tick.
  const details = changed || state.ticks % DETAIL_POLL_TICKS === 1;
  const job = details ? await get(`/api/v1/jobs/${jobId}`) : null;
  if (state.job !== jobId) return;
  if (job) showAttempts(job);
  await Promise.all([
    escrow.load(jobId),
    showAuction(jobId, state.pricing),
    job ? showDeliveries(jobId, job).then((done) => (state.deliveriesDone = done)) : null,
  ]);
  const logs = await get(`/api/v1/jobs/${jobId}/logs?after=${state.logCursor}`);
  if (state.job !== jobId) return;
  if (logs.lines.length) {
    const pre = $("job-logs");
    const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.append(logs.lines.map((l) => `[${l.stream}] ${l.text}`).join("\n") + "\n");
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  }
  state.logCursor = logs.next_after;
  await showResults(jobId);
}

// Results reach the submitter only with the oracles' verdict (verified, or the job's fault):
// before it, and for good after a provider's-fault or unproven verdict, the API answers 409
// with what the release waits on; the list says so instead of offering downloads.
async function showResults(jobId) {
  const list = $("job-results");
  let results;
  try {
    results = await get(`/api/v1/jobs/${jobId}/results`);
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 409) throw e;
    if (state.job !== jobId) return;
    state.resultsReleased = false;
    list.replaceChildren(el("li", { "data-release": "withheld" }, e.message));
    return;
  }
  if (state.job !== jobId) return;
  state.resultsReleased = results.length > 0;
  list.replaceChildren(
    ...(results.length
      ? results.map((r) =>
          el(
            "li",
            {},
            el(
              "button",
              {
                type: "button",
                class: "secondary",
                onclick: () =>
                  download(`/api/v1/jobs/${jobId}/results/${r.name.split("/").map(encodeURIComponent).join("/")}`, r.name.split("/").pop()).catch(fail),
              },
              `Download ${r.name}`,
            ),
            ` ${r.size.toLocaleString("en")} bytes, sha256 ${r.sha256.slice(0, 16)}…`,
          ),
        )
      : [el("li", {}, "None yet.")]),
  );
}

async function afterMoney() {
  state.status = null; // read the job again: a cancel changes it
  await Promise.all([refreshJob(), loadBalances(), loadJobs()]);
}

// --- approvals (api/web/js/approvals.js) and the escrow (api/web/js/escrow.js) -------------

const approvals = new Approvals({
  wallet: () => state.wallet,
  address: () => state.address,
  me: () => state.me,
  notify,
  fail,
  busy,
});

const escrow = new EscrowPanel({
  wallet: () => state.wallet,
  notify,
  job: () => state.job,
  status: () => state.status,
});

// --- start -----------------------------------------------------------------------------

function start() {
  $("f-seed").value = randomSeed();
  showUnits();
  loadNetwork()
    .then(() => Promise.all([showProviders(), showStorageOffers(), showOpenAuctions()]))
    .catch(fail);
  $("f-pricing").addEventListener("change", (e) => {
    const auction = e.currentTarget.value === "auction";
    $("f-window-field").hidden = !auction;
    $("price-label").textContent = auction ? "Reserve" : "Price";
  });
  listWallets();
  // Wallet extensions inject window.cardano after the page loads.
  setTimeout(listWallets, 500);
  setTimeout(listWallets, 2000);
  $("units-toggle").addEventListener("change", (e) => toggleUnits(e.currentTarget.checked).catch(fail));
  $("sign-in").addEventListener("click", (e) => busy(e.currentTarget, signIn));
  $("sign-out").addEventListener("click", (e) => busy(e.currentTarget, signOut));
  $("apply-form").addEventListener("submit", (e) => apply(e).catch(fail));
  $("refresh-application").addEventListener("click", (e) => busy(e.currentTarget, loadAccount));
  $("job-form").addEventListener("submit", (e) => busy($("post-job"), () => postJob(e)));
  $("estimate-job").addEventListener("click", (e) => busy(e.currentTarget, estimateJob));
  $("lock-escrow").addEventListener("click", (e) => busy(e.currentTarget, () => escrow.lock().then(afterMoney)));
  $("cancel-job").addEventListener("click", (e) => busy(e.currentTarget, () => escrow.cancel().then(afterMoney)));
  $("refund-escrow").addEventListener("click", (e) => busy(e.currentTarget, () => escrow.refund().then(afterMoney)));
  $("refresh-jobs").addEventListener("click", (e) => busy(e.currentTarget, loadJobs));
  $("refresh-balances").addEventListener("click", (e) => busy(e.currentTarget, loadBalances));
  if (token()) loadAccount().catch(fail);
}

start();
