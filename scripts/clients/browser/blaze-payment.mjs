// The browser side of test_js_clients.py: Blaze, bundled for the browser by
// scripts/clients/build-browser.mjs, pays from a key through its Blockfrost provider
// pointed at the devnet (another origin than this page's, so every call crosses CORS).
import { Blaze, Blockfrost, Core, HotSingleWallet } from "@blaze-cardano/sdk";

async function pay({ url, signing_key, recipient, lovelace }) {
  const provider = new Blockfrost({ network: "cardano-preview", projectId: "devnet" });
  provider.url = `${url}/`; // as Blaze writes its base: doubled slashes follow
  const wallet = new HotSingleWallet(
    Core.Ed25519PrivateNormalKeyHex(signing_key),
    Core.NetworkId.Testnet,
    provider,
  );
  const blaze = await Blaze.from(provider, wallet);
  const tx = await blaze
    .newTransaction()
    .payLovelace(Core.Address.fromBech32(recipient), BigInt(lovelace))
    .complete();
  return blaze.submitTransaction(await blaze.signTransaction(tx));
}

window.proofnetPay = async (input) => {
  try {
    return { ok: true, tx_hash: await pay(input) };
  } catch (error) {
    return { ok: false, error: error instanceof Error ? `${error.message}\n${error.stack}` : String(error) };
  }
};
window.proofnetReady = true;
