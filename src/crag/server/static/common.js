// Shared helpers of the trace viewer. Every piece of user text goes through text nodes
// (never HTML parsing), and links accept only http(s) URLs, so traces cannot inject script.
"use strict";

const KEY_NAME = "crag_api_key";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "href") { const url = safeUrl(value); if (url) node.setAttribute("href", url); continue; }
    node.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Same-page anchors (citations), relative links (our own pages) and http(s) only:
// "javascript:" and "data:" never reach an href.
function safeUrl(value) {
  const text = String(value || "");
  if (/^#[\w-]+$/.test(text)) return text;
  if (text.startsWith("/") && !text.startsWith("//")) return text;
  try {
    const url = new URL(text);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch (_) { return null; }
}

function num(value, digits = 2) {
  return typeof value === "number" && isFinite(value) ? value.toFixed(digits) : "–";
}

function ms(value) {
  return typeof value === "number" && isFinite(value) ? `${Math.round(value).toLocaleString()} ms` : "–";
}

function when(iso) { return String(iso || "").slice(0, 19).replace("T", " "); }

// The action in its colour only when an answer was given (or a retriever's run stopped before
// generation on purpose): a failed, refused or abstained request shows its action muted,
// never as a green "correct".
function badge(action, status) {
  const answered = status === undefined || status === null || ["answered", "degraded", "retrieved"].includes(status);
  const name = answered && ["correct", "ambiguous", "incorrect", "rag"].includes(action) ? action : "unknown";
  return el("span", { class: `badge ${name}` }, String(action || "?"));
}

function statusBadge(status) {
  const name = ["answered", "degraded", "refused", "abstained", "failed", "cancelled", "retrieved"].includes(status) ? status : "unknown";
  return el("span", { class: `badge status-${name}` }, String(status || "?"));
}

// The collection this page is about (?collection=NAME), "" for the server's default.
function currentCollection() { return new URLSearchParams(location.search).get("collection") || ""; }

// path with ?collection=NAME (or &collection=) when a collection is chosen.
function inCollection(path, name = currentCollection()) {
  if (!name) return path;
  return `${path}${path.includes("?") ? "&" : "?"}collection=${encodeURIComponent(name)}`;
}

// A page opened without ?collection= (a trace link typed or shared) whose key may use one
// collection that a request naming none would not get (the server holds several): the
// page takes that collection into its URL, so every request and link of the page names it.
let keyCollection = null;
function keyCollectionReady() {
  keyCollection = keyCollection || (async () => {
    if (currentCollection()) return;
    try {
      const data = await api("/v1/collections");
      const names = data.collections.map((c) => c.name);
      if (names.length !== 1 || names[0] === data.default) return;
      const url = new URL(location.href);
      url.searchParams.set("collection", names[0]);
      history.replaceState(null, "", url);
    } catch (_) { /* the page's own request shows the error */ }
  })();
  return keyCollection;
}

async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  const key = sessionStorage.getItem(KEY_NAME);
  if (key) headers["Authorization"] = `Bearer ${key}`;
  const response = await fetch(path, Object.assign({}, options, { headers }));
  let body = null;
  try { body = await response.json(); } catch (_) { body = null; }
  if (!response.ok) {
    const message = body && body.error ? `${body.error.type}: ${body.error.message}` : `HTTP ${response.status}`;
    throw new Error(message);
  }
  return body;
}

// The API key lives in sessionStorage only: never in the URL, never in the page.
function keyBox() {
  const box = document.getElementById("key");
  if (!box) return;
  const input = el("input", { type: "password", placeholder: "API key (if required)", autocomplete: "off" });
  const save = el("button", { type: "button" }, "use key");
  const state = el("span", {}, sessionStorage.getItem(KEY_NAME) ? "key set" : "");
  save.addEventListener("click", () => {
    if (input.value) sessionStorage.setItem(KEY_NAME, input.value); else sessionStorage.removeItem(KEY_NAME);
    input.value = "";
    location.reload();
  });
  box.append(state, input, save);
}

// Server-sent events from a fetch body: [event name, data] per block (blocks end with a blank
// line; a block without data, a keep-alive comment, is skipped). The ask box and the chat page read it.
async function* sseBlocks(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (data) yield [name, data];
    }
    if (done) return;
  }
}

document.addEventListener("DOMContentLoaded", keyBox);
