// Lucid Evolution against the devnet through its Blockfrost provider (see common.mjs).
import {
  Blockfrost,
  CML,
  Data,
  Lucid,
  SLOT_CONFIG_NETWORK,
  fromText,
  mintingPolicyToId,
  paymentCredentialOf,
  scriptFromNative,
  validatorToAddress,
} from "@lucid-evolution/lucid";
import { readInput, runSteps } from "./common.mjs";

const input = await readInput();
const genesis = await (await fetch(`${input.url}/genesis`)).json();
SLOT_CONFIG_NETWORK.Custom = {
  zeroTime: genesis.system_start * 1000,
  zeroSlot: 0,
  slotLength: genesis.slot_length * 1000,
};
const lucid = await Lucid(new Blockfrost(input.url, "devnet"), "Custom");
const key = CML.PrivateKey.from_normal_bytes(Buffer.from(input.signing_key, "hex"));
lucid.selectWallet.fromPrivateKey(key.to_bech32());
const address = await lucid.wallet().address();
if (address !== input.address) throw new Error(`wallet address ${address} != ${input.address}`);

const policy = scriptFromNative({ type: "sig", keyHash: paymentCredentialOf(address).hash });
const unit = mintingPolicyToId(policy) + fromText("lucid");
const validator = { type: "PlutusV3", script: input.script };
const scriptAddress = validatorToAddress("Custom", validator);
let locked;

await runSteps(input.url, [
  ["payment", async () => {
    const tx = await lucid.newTx().pay.ToAddress(input.recipient, { lovelace: 3_000_000n }).complete();
    return (await tx.sign.withWallet().complete()).submit();
  }],
  ["mint", async () => {
    const tx = await lucid.newTx().mintAssets({ [unit]: 42n }).attach.MintingPolicy(policy).complete();
    return (await tx.sign.withWallet().complete()).submit();
  }],
  ["lock", async () => {
    const tx = await lucid
      .newTx()
      .pay.ToContract(scriptAddress, { kind: "inline", value: Data.void() }, { lovelace: 5_000_000n })
      .complete();
    locked = await (await tx.sign.withWallet().complete()).submit();
    return locked;
  }],
  ["spend", async () => {
    const utxos = (await lucid.utxosAt(scriptAddress)).filter((u) => u.txHash === locked);
    const tx = await lucid
      .newTx()
      .collectFrom(utxos, Data.void())
      .attach.SpendingValidator(validator)
      .complete();
    return (await tx.sign.withWallet().complete()).submit();
  }],
]);
