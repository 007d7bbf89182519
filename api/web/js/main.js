// The page: connect a CIP-30 wallet, sign in, post jobs, lock their escrow, follow them.

import { ApiError, download, get, post, setToken, token } from "./api.js";
import { Approvals, applicationStatus } from "./approvals.js";
import { el } from "./dom.js";
import { randomSeed, readJobForm } from "./jobform.js";
import { ConnectedWallet, availableWallets } from "./wallet.js";

const $ = (id) => document.getElementById(id);
const POLL_MS = 2000;
const ESCROW_RECORD_TRIES = 60;

const state = {
  wallet: null,
  address: sessionStorage.getItem("proofnet.address"),
  me: null,
  job: null,
  status: null,
  logCursor: 0,
  poll: null,
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
    syncJobButtons();
  }
}

// What the selected job allows: no escrow twice, nothing once it is over.
function syncJobButtons() {
  if (!state.job) return;
  const terminal = ["completed", "failed", "cancelled"].includes(state.status);
  const saved = JSON.parse(localStorage.getItem(escrowKey(state.job)) || "null");
  $("cancel-job").disabled = terminal;
  $("lock-escrow").disabled = terminal || Boolean(saved && saved.tx_id);
}

const ada = (lovelace) => (lovelace === null || lovelace === undefined ? "—" : (lovelace / 1e6).toFixed(6));
const ntx = (n) => (n === null || n === undefined ? "—" : Number(n).toLocaleString("en"));
const shortId = (id) => `${id.slice(0, 10)}…${id.slice(-6)}`;

// --- wallet and sign-in -------------------------------------------------------------

function listWallets() {
  const select = $("wallet-select");
  const found = availableWallets();
  const current = select.value;
  select.replaceChildren(...found.map((w) => el("option", { value: w.id }, w.name)));
  if (found.some((w) => w.id === current)) select.value = current;
  $("connect").disabled = !found.length;
  $("wallet-hint").textContent = found.length ? "" : "No CIP-30 wallet found in this browser.";
}

async function connect() {
  const id = $("wallet-select").value;
  state.wallet = await ConnectedWallet.connect(id);
  state.address = await state.wallet.address();
  sessionStorage.setItem("proofnet.address", state.address);
  $("account-address").textContent = state.address;
  $("sign-in").hidden = false;
  $("connect").textContent = "Reconnect";
  notify(`Connected ${id}. Sign in to continue.`);
}

async function signIn() {
  if (!state.wallet) throw new Error("connect a wallet first");
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
      el("td", { class: "num", "data-ntx": String(amount.ntx ?? "") }, ntx(amount.ntx)),
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
        `${ntx(m.amount)} NTX ${verb} `,
        el("code", {}, m.job_id ? shortId(m.job_id) : "—"),
        ` (${what[m.action] || m.action}) on ${new Date(m.confirmed_at).toLocaleString()}, tx `,
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
      const price = job.spec.pricing.amount ?? job.spec.pricing.max_amount;
      return el(
        "tr",
        { "data-job": job.job_id, "aria-selected": String(state.job === job.job_id) },
        el("td", {}, el("button", { type: "button", class: "secondary", onclick: open }, shortId(job.job_id))),
        el("td", { class: `status-${job.status}` }, job.status),
        el("td", { class: "num" }, ntx(price)),
        el("td", {}, new Date(job.created_at).toLocaleString()),
      );
    }),
  );
}

function markInvalid(form, errors) {
  for (const input of form.querySelectorAll("[aria-invalid]")) input.removeAttribute("aria-invalid");
  for (const [name] of errors) form.elements[name]?.setAttribute("aria-invalid", "true");
  $("form-errors").replaceChildren(...errors.map(([, msg]) => el("li", {}, msg)));
}

async function postJob(event) {
  event.preventDefault();
  const form = $("job-form");
  const { spec, errors } = readJobForm(form);
  markInvalid(form, errors);
  if (errors.length) {
    form.elements[errors[0][0]]?.focus();
    return;
  }
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

function escrowKey(jobId) {
  return `proofnet.escrow.${jobId}`;
}

function showEscrow(jobId) {
  const saved = localStorage.getItem(escrowKey(jobId));
  const box = $("job-escrow");
  if (!saved) {
    box.textContent = "not locked (or locked from another browser)";
    return;
  }
  const e = JSON.parse(saved);
  box.replaceChildren(
    `${ntx(e.budget)} NTX locked until ${new Date(e.deadline_ms).toLocaleString()} in `,
    el("code", { id: "escrow-ref" }, `${e.tx_id}#${e.index}`),
    e.recorded ? " (recorded)" : " (submitted, waiting for the chain)",
  );
}

async function selectJob(jobId) {
  stopPolling();
  state.job = jobId;
  state.status = null;
  state.logCursor = 0;
  $("job").hidden = false;
  $("job-id").textContent = jobId;
  $("job-logs").textContent = "";
  showEscrow(jobId);
  for (const row of document.querySelectorAll("#job-rows tr[data-job]")) {
    row.setAttribute("aria-selected", String(row.dataset.job === jobId));
  }
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
  const st = await get(`/api/v1/jobs/${jobId}/status`);
  if (state.job !== jobId) return;
  $("job-status").textContent = st.status;
  $("job-status").className = `status-${st.status}`;
  $("job-reason").textContent = st.reason;
  $("job-progress").value = st.progress;
  $("job-progress-text").textContent = `${Math.round(st.progress * 100)}% ${st.progress_message}`;
  state.status = st.status;
  const terminal = ["completed", "failed", "cancelled"].includes(st.status);
  syncJobButtons();
  const logs = await get(`/api/v1/jobs/${jobId}/logs?after=${state.logCursor}`);
  if (state.job !== jobId) return;
  if (logs.lines.length) {
    const pre = $("job-logs");
    const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.append(logs.lines.map((l) => `[${l.stream}] ${l.text}`).join("\n") + "\n");
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  }
  state.logCursor = logs.next_after;
  const results = await get(`/api/v1/jobs/${jobId}/results`);
  const list = $("job-results");
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
  if (terminal) stopPolling();
}

async function lockEscrow() {
  const jobId = state.job;
  if (!state.wallet) throw new Error("connect the wallet that signed in to sign the escrow");
  notify("Building the escrow transaction…");
  const built = await post(`/api/v1/jobs/${jobId}/escrow/build`, {
    change_address: await state.wallet.changeAddress(),
    utxos: await state.wallet.utxos(),
  });
  notify(`Sign in your wallet: lock ${ntx(built.budget)} NTX (fee ${ada(built.fee_lovelace)} ADA).`);
  const witnessSet = await state.wallet.signTx(built.tx_cbor);
  const done = await post(`/api/v1/jobs/${jobId}/escrow/submit`, {
    tx_cbor: built.tx_cbor,
    witness_set: witnessSet,
  });
  const record = {
    tx_id: done.tx_id,
    index: done.escrow_index,
    budget: built.budget,
    deadline_ms: built.deadline_ms,
    recorded: done.recorded,
  };
  localStorage.setItem(escrowKey(jobId), JSON.stringify(record));
  showEscrow(jobId);
  if (!done.recorded) {
    notify(`Escrow submitted in ${shortId(done.tx_id)}; waiting for the chain to confirm it…`);
    await recordWhenConfirmed(jobId, record);
  }
  notify(`Escrow locked in transaction ${done.tx_id}.`);
  await Promise.all([refreshJob(), loadBalances()]);
}

async function recordWhenConfirmed(jobId, record) {
  for (let i = 0; i < ESCROW_RECORD_TRIES; i++) {
    await new Promise((r) => setTimeout(r, 5000));
    try {
      await post(`/api/v1/jobs/${jobId}/escrow`, { tx_id: record.tx_id, index: record.index });
      record.recorded = true;
      localStorage.setItem(escrowKey(jobId), JSON.stringify(record));
      showEscrow(jobId);
      return;
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 400) throw e; // 400: not on chain yet
    }
  }
  throw new Error("the escrow transaction is not on chain yet; reload later to check");
}

async function cancelJob() {
  await post(`/api/v1/jobs/${state.job}/cancel`);
  notify("Job cancelled.");
  await Promise.all([refreshJob(), loadJobs()]);
}

// --- approvals (api/web/js/approvals.js) -------------------------------------------------

const approvals = new Approvals({
  wallet: () => state.wallet,
  address: () => state.address,
  me: () => state.me,
  notify,
  fail,
  busy,
});

// --- start -----------------------------------------------------------------------------

function start() {
  $("f-seed").value = randomSeed();
  listWallets();
  // Wallet extensions inject window.cardano after the page loads.
  setTimeout(listWallets, 500);
  setTimeout(listWallets, 2000);
  $("connect").addEventListener("click", (e) => busy(e.currentTarget, connect));
  $("sign-in").addEventListener("click", (e) => busy(e.currentTarget, signIn));
  $("sign-out").addEventListener("click", (e) => busy(e.currentTarget, signOut));
  $("apply-form").addEventListener("submit", (e) => apply(e).catch(fail));
  $("refresh-application").addEventListener("click", (e) => busy(e.currentTarget, loadAccount));
  $("job-form").addEventListener("submit", (e) => busy($("post-job"), () => postJob(e)));
  $("lock-escrow").addEventListener("click", (e) => busy(e.currentTarget, lockEscrow));
  $("cancel-job").addEventListener("click", (e) => busy(e.currentTarget, cancelJob));
  $("refresh-jobs").addEventListener("click", (e) => busy(e.currentTarget, loadJobs));
  $("refresh-balances").addEventListener("click", (e) => busy(e.currentTarget, loadBalances));
  if (token()) loadAccount().catch(fail);
}

start();
