// Node's globals that the Cardano JS SDK's dependencies use without importing them; esbuild
// injects these where a bundled module names them (see build-browser.mjs).
export { Buffer } from "buffer";
export { default as process } from "process/browser.js";
