// Bech32 (BIP-173) encoding of raw address bytes, as CIP-19 writes Cardano addresses.
// CIP-30 wallets answer addresses as hex bytes; the API speaks bech32.

const CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l";
const GENERATOR = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];

function polymod(values) {
  let chk = 1;
  for (const v of values) {
    const top = chk >>> 25;
    chk = ((chk & 0x1ffffff) << 5) ^ v;
    for (let i = 0; i < 5; i++) if ((top >>> i) & 1) chk ^= GENERATOR[i];
  }
  return chk;
}

function hrpExpand(hrp) {
  const out = [];
  for (const c of hrp) out.push(c.charCodeAt(0) >>> 5);
  out.push(0);
  for (const c of hrp) out.push(c.charCodeAt(0) & 31);
  return out;
}

function toWords(bytes) {
  const words = [];
  let acc = 0;
  let bits = 0;
  for (const b of bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      words.push((acc >>> bits) & 31);
    }
  }
  if (bits > 0) words.push((acc << (5 - bits)) & 31);
  return words;
}

export function bech32Encode(hrp, bytes) {
  const data = toWords(bytes);
  const mod = polymod([...hrpExpand(hrp), ...data, 0, 0, 0, 0, 0, 0]) ^ 1;
  const checksum = [];
  for (let i = 0; i < 6; i++) checksum.push((mod >>> (5 * (5 - i))) & 31);
  return hrp + "1" + [...data, ...checksum].map((w) => CHARSET[w]).join("");
}

export function hexToBytes(hex) {
  if (typeof hex !== "string" || hex.length % 2 || /[^0-9a-fA-F]/.test(hex)) {
    throw new Error("not hex: " + String(hex).slice(0, 20));
  }
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

export function bytesToHex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

// A Shelley address (hex bytes or already bech32) as bech32; the header's low nibble is
// the network id (0 testnet, 1 mainnet), its high nibble the kind (14, 15: stake).
export function addressToBech32(address) {
  if (/^(addr|stake)(_test)?1/.test(address)) return address;
  const bytes = hexToBytes(address);
  if (!bytes.length) throw new Error("empty address");
  const testnet = (bytes[0] & 0x0f) === 0;
  const stake = bytes[0] >>> 4 === 14 || bytes[0] >>> 4 === 15;
  const hrp = (stake ? "stake" : "addr") + (testnet ? "_test" : "");
  return bech32Encode(hrp, bytes);
}

export function utf8ToHex(text) {
  return bytesToHex(new TextEncoder().encode(text));
}
