// CIP-30 wallets: discovery, connection, addresses, signData (sign-in) and signTx (escrow).

import { addressToBech32, utf8ToHex } from "./bech32.js";

export function availableWallets() {
  const root = window.cardano || {};
  return Object.keys(root)
    .filter((k) => root[k] && typeof root[k].enable === "function")
    .map((k) => ({ id: k, name: root[k].name || k, icon: root[k].icon || "" }));
}

function cip30Error(e) {
  // CIP-30 errors are {code, info}; user refusal is code -3 (APIError) or 2 (TxSign/DataSign).
  if (e && typeof e === "object" && "info" in e) return new Error(`wallet: ${e.info}`);
  return e instanceof Error ? e : new Error(String(e));
}

export class ConnectedWallet {
  constructor(id, api) {
    this.id = id;
    this.api = api;
  }

  static async connect(id) {
    const entry = (window.cardano || {})[id];
    if (!entry) throw new Error(`no wallet "${id}" in this browser`);
    try {
      return new ConnectedWallet(id, await entry.enable());
    } catch (e) {
      throw cip30Error(e);
    }
  }

  async networkId() {
    return this.api.getNetworkId();
  }

  // The address to sign in with: the first used one, else the change address.
  async address() {
    try {
      const used = await this.api.getUsedAddresses();
      const raw = used && used.length ? used[0] : await this.api.getChangeAddress();
      return addressToBech32(raw);
    } catch (e) {
      throw cip30Error(e);
    }
  }

  async changeAddress() {
    try {
      return addressToBech32(await this.api.getChangeAddress());
    } catch (e) {
      throw cip30Error(e);
    }
  }

  async utxos() {
    try {
      const found = await this.api.getUtxos();
      return Array.isArray(found) && found.length ? found : null;
    } catch {
      return null; // the server then reads the change address's UTxOs from the chain
    }
  }

  async signMessage(address, message) {
    try {
      return await this.api.signData(address, utf8ToHex(message));
    } catch (e) {
      throw cip30Error(e);
    }
  }

  async signTx(txCbor) {
    try {
      return await this.api.signTx(txCbor, true);
    } catch (e) {
      throw cip30Error(e);
    }
  }
}
