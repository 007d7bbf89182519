// Bundle the browser page's client (browser/blaze-payment.mjs) with esbuild into one
// script: `node scripts/clients/build-browser.mjs OUTDIR` writes OUTDIR/index.html and
// OUTDIR/blaze-payment.js. Run by tests/chain/devnet/test_js_clients.py; everything comes
// from node_modules (installed by `make node`), nothing is downloaded.
import { copyFileSync, mkdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const require = (await import("node:module")).createRequire(import.meta.url);

// wasm-bindgen's "bundler" output imports its .wasm as an ES module (the WebAssembly ESM
// integration webpack implements). esbuild has no such loader: this plugin turns each .wasm
// import into a module that instantiates the embedded bytes (top-level await) with the
// modules the binary imports, and re-exports the instance's exports by name.
const wasmModules = {
  name: "wasm-esm-integration",
  setup(b) {
    b.onResolve({ filter: /\.wasm$/ }, (args) => ({
      path: resolve(args.resolveDir, args.path),
      namespace: args.namespace === "wasm-instance" ? "wasm-bytes" : "wasm-instance",
    }));
    b.onLoad({ filter: /.*/, namespace: "wasm-bytes" }, (args) => ({
      contents: readFileSync(args.path),
      loader: "binary",
    }));
    b.onLoad({ filter: /.*/, namespace: "wasm-instance" }, (args) => {
      const module = new WebAssembly.Module(readFileSync(args.path)); // to read names only
      const sources = [...new Set(WebAssembly.Module.imports(module).map((i) => i.module))];
      const names = WebAssembly.Module.exports(module).map((e) => e.name);
      const bad = names.find((n) => !/^[A-Za-z_$][\w$]*$/.test(n));
      if (bad) throw new Error(`${args.path} exports ${bad}, not a JavaScript name`);
      const lines = [`import bytes from ${JSON.stringify(args.path)};`];
      sources.forEach((s, i) => lines.push(`import * as m${i} from ${JSON.stringify(s)};`));
      const table = sources.map((s, i) => `${JSON.stringify(s)}: m${i}`).join(", ");
      lines.push(`const { instance } = await WebAssembly.instantiate(bytes, { ${table} });`);
      for (const n of names) lines.push(`export const ${n} = instance.exports.${n};`);
      return { contents: lines.join("\n"), resolveDir: dirname(args.path), loader: "js" };
    });
  },
};

const outdir = process.argv[2];
if (!outdir) throw new Error("usage: build-browser.mjs OUTDIR");
mkdirSync(outdir, { recursive: true });
await build({
  entryPoints: [join(here, "browser", "blaze-payment.mjs")],
  outfile: join(outdir, "blaze-payment.js"),
  bundle: true,
  platform: "browser",
  format: "esm",
  target: "es2022",
  logLevel: "warning",
  plugins: [wasmModules],
  define: { global: "globalThis" },
  inject: [join(here, "browser", "node-globals.mjs")],
  // The browser build of the COSE library the Cardano JS SDK imports by its Node name.
  alias: {
    "@emurgo/cardano-message-signing-nodejs": "@emurgo/cardano-message-signing-browser",
  },
});
copyFileSync(join(here, "browser", "index.html"), join(outdir, "index.html"));
