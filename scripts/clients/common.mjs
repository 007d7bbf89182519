// What every client script shares: its input, waiting for a block, and its report.
//
// A client script is run by tests/chain/devnet/test_js_clients.py with one JSON object on
// stdin: {"url": the devnet's Blockfrost base (".../api/v0"), "signing_key": hex of a
// funded ed25519 payment key (32 bytes), "address": that key's enterprise address,
// "recipient": an address to pay, "script": a Plutus V3 script (CBOR hex, as in a witness
// set) that accepts any redeemer}. It runs a payment, a mint and a Plutus V3 spend through
// the client's own Blockfrost provider and prints {"ok": true, "steps": {name: tx hash}} or
// {"ok": false, "step": name, "error": message} as its last line.

export async function readInput() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

// Until the devnet has put `txHash` in a block. Polls Blockfrost's /txs/{hash} (the
// devnet makes a block every fraction of a second), so no client's own 20-second wait.
export async function waitForTx(url, txHash, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const response = await fetch(`${url}/txs/${txHash}`);
    if (response.ok) return;
    if (Date.now() > deadline) throw new Error(`transaction ${txHash} not in a block in time`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

// Run `steps` ([name, async () => txHash] in order), each confirmed before the next, and
// print the report. The process exits 0 only when every step was confirmed.
export async function runSteps(url, steps) {
  const done = {};
  for (const [name, step] of steps) {
    try {
      const txHash = await step();
      await waitForTx(url, txHash);
      done[name] = txHash;
    } catch (error) {
      const message = error instanceof Error ? `${error.message}\n${error.stack}` : String(error);
      console.log(JSON.stringify({ ok: false, step: name, error: message, steps: done }));
      process.exit(1);
    }
  }
  console.log(JSON.stringify({ ok: true, steps: done }));
}
