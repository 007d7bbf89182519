// Mesh against the devnet through its Blockfrost provider (see common.mjs).
import {
  BlockfrostProvider,
  ForgeScript,
  MeshTxBuilder,
  MeshWallet,
  applyCborEncoding,
  mConStr0,
  resolveScriptHash,
  serializePlutusScript,
  stringToHex,
} from "@meshsdk/core";
import { readInput, runSteps } from "./common.mjs";

const input = await readInput();
const provider = new BlockfrostProvider(input.url);
const wallet = new MeshWallet({
  networkId: 0,
  fetcher: provider,
  submitter: provider,
  key: { type: "cli", payment: `5820${input.signing_key}` },
});
await wallet.init();
const address = await wallet.getChangeAddress("enterprise");
if (address !== input.address) throw new Error(`wallet address ${address} != ${input.address}`);

const forgingScript = ForgeScript.withOneSignature(address);
const policyId = resolveScriptHash(forgingScript);
// Mesh takes a script as Aiken's blueprint gives it, wrapped once more in CBOR.
const script = { code: applyCborEncoding(input.script), version: "V3" };
const scriptAddress = serializePlutusScript(script, undefined, 0).address;
// Collateral is set aside as a wallet does (the test funds a 5-ADA output for it) and kept
// out of coin selection, so no earlier step spends it or mixes tokens into it.
const collateral = (await wallet.getCollateral("enterprise"))[0];
if (!collateral) throw new Error("the wallet holds no ADA-only output of 5 ADA for collateral");
const isCollateral = (u) =>
  u.input.txHash === collateral.input.txHash && u.input.outputIndex === collateral.input.outputIndex;
const spendable = async () => (await wallet.getUtxos("enterprise")).filter((u) => !isCollateral(u));
let locked;

function builder() {
  return new MeshTxBuilder({ fetcher: provider, evaluator: provider, submitter: provider });
}

async function signAndSubmit(unsigned) {
  return wallet.submitTx(await wallet.signTx(unsigned));
}

await runSteps(input.url, [
  ["payment", async () => {
    const unsigned = await builder()
      .txOut(input.recipient, [{ unit: "lovelace", quantity: "3000000" }])
      .changeAddress(address)
      .selectUtxosFrom(await spendable())
      .complete();
    return signAndSubmit(unsigned);
  }],
  ["mint", async () => {
    const unsigned = await builder()
      .mint("42", policyId, stringToHex("mesh"))
      .mintingScript(forgingScript)
      .changeAddress(address)
      .selectUtxosFrom(await spendable())
      .complete();
    return signAndSubmit(unsigned);
  }],
  ["lock", async () => {
    const unsigned = await builder()
      .txOut(scriptAddress, [{ unit: "lovelace", quantity: "5000000" }])
      .txOutInlineDatumValue(mConStr0([]))
      .changeAddress(address)
      .selectUtxosFrom(await spendable())
      .complete();
    locked = await signAndSubmit(unsigned);
    return locked;
  }],
  ["spend", async () => {
    const utxo = (await provider.fetchAddressUTxOs(scriptAddress)).find(
      (u) => u.input.txHash === locked,
    );
    if (!utxo) throw new Error(`the locked output of ${locked} is not at the script address`);
    const unsigned = await builder()
      .spendingPlutusScriptV3()
      .txIn(utxo.input.txHash, utxo.input.outputIndex, utxo.output.amount, utxo.output.address)
      .txInScript(script.code)
      .txInInlineDatumPresent()
      .txInRedeemerValue(mConStr0([]))
      .txInCollateral(collateral.input.txHash, collateral.input.outputIndex)
      .changeAddress(address)
      .selectUtxosFrom(await spendable())
      .complete();
    return signAndSubmit(unsigned);
  }],
]);
