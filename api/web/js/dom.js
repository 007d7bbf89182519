// Small DOM helpers shared by the page's modules.

// el("li", {class: "x", onclick: f}, "text", child): an element with attributes, listeners
// (on*) and children; text children are text nodes, never parsed as HTML.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  node.append(...children);
  return node;
}

// A bech32 address or hash short enough for a phone's width; the whole one goes in `title`.
export const shortAddress = (address) =>
  address.length > 24 ? `${address.slice(0, 14)}…${address.slice(-8)}` : address;
