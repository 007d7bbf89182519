// Blaze against the devnet through its Blockfrost provider (see common.mjs).
import { Blaze, Blockfrost, Core, HotSingleWallet } from "@blaze-cardano/sdk";
import { readInput, runSteps } from "./common.mjs";

const input = await readInput();
const provider = new Blockfrost({ network: "cardano-preview", projectId: "devnet" });
// Blaze builds https://<network>.blockfrost.io/api/v0/ and appends paths that begin with a
// slash; pointed elsewhere, the base keeps its trailing slash exactly as Blaze writes it.
provider.url = `${input.url}/`;
const wallet = new HotSingleWallet(
  Core.Ed25519PrivateNormalKeyHex(input.signing_key),
  Core.NetworkId.Testnet,
  provider,
);
const blaze = await Blaze.from(provider, wallet);
if (wallet.address.toBech32() !== input.address) {
  throw new Error(`wallet address ${wallet.address.toBech32()} != ${input.address}`);
}

const keyHash = wallet.address.asEnterprise().getPaymentCredential().hash;
const policy = Core.Script.newNativeScript(
  Core.NativeScript.newScriptPubkey(new Core.ScriptPubkey(keyHash)),
);
const policyId = Core.PolicyId(policy.hash());
const assetName = Core.AssetName(Buffer.from("blaze").toString("hex"));
const validator = Core.Script.newPlutusV3Script(new Core.PlutusV3Script(Core.HexBlob(input.script)));
const scriptAddress = Core.addressFromValidator(Core.NetworkId.Testnet, validator);
const unit = Core.PlutusData.newConstrPlutusData(
  new Core.ConstrPlutusData(0n, new Core.PlutusList()),
);
let locked;

async function signAndSubmit(tx) {
  return blaze.submitTransaction(await blaze.signTransaction(tx));
}

await runSteps(input.url, [
  ["payment", async () => {
    const tx = await blaze
      .newTransaction()
      .payLovelace(Core.Address.fromBech32(input.recipient), 3_000_000n)
      .complete();
    return signAndSubmit(tx);
  }],
  ["mint", async () => {
    const tx = await blaze
      .newTransaction()
      .addMint(policyId, new Map([[assetName, 42n]]))
      .provideScript(policy)
      .complete();
    return signAndSubmit(tx);
  }],
  ["lock", async () => {
    const tx = await blaze.newTransaction().lockLovelace(scriptAddress, 5_000_000n, unit).complete();
    locked = await signAndSubmit(tx);
    return locked;
  }],
  ["spend", async () => {
    const utxos = await provider.getUnspentOutputs(scriptAddress);
    const utxo = utxos.find((u) => u.input().transactionId() === locked);
    if (!utxo) throw new Error(`the locked output of ${locked} is not at the script address`);
    const tx = await blaze.newTransaction().addInput(utxo, unit).provideScript(validator).complete();
    return signAndSubmit(tx);
  }],
]);
