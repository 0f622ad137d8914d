// The chat page: a conversation over POST /v1/chat/completions with stream=true.
// Each turn sends the whole conversation (the server condenses a follow-up into a standalone
// question); the answer streams in a verified sentence at a time; the final chunk's `crag`
// field gives the decision (action, confidence), the trace id and each citation's supporting
// quote, shown when the reader points at (or focuses) an [n] marker.
// Everything is built with text nodes (el), as in the rest of the viewer.
"use strict";

const conversation = [];  // {role, content} messages sent so far, answers included
let turnCount = 0;
let modelsListed = false;  // GET /v1/models exists: requests name the chosen collection
let answering = null;  // the AbortController of the turn being answered: a new conversation stops it

function authHeaders(extra) {
  const headers = Object.assign({}, extra || {});
  const key = sessionStorage.getItem(KEY_NAME);
  if (key) headers["Authorization"] = `Bearer ${key}`;
  return headers;
}

async function errorOf(response) {
  try {
    const body = await response.json();
    if (body && body.error) return `${body.error.type || body.error.code || "error"}: ${body.error.message}`;
  } catch (_) { /* not JSON */ }
  return `HTTP ${response.status}`;
}

// The collections this key may use, as OpenAI models; a server without /v1/models (404) has
// one knowledge base, and the picker stays hidden.
async function loadModels() {
  const box = document.getElementById("model-box");
  const select = document.getElementById("model");
  const response = await fetch("/v1/models", { headers: authHeaders() });
  if (response.status === 404) { box.hidden = true; return; }
  if (!response.ok) throw new Error(await errorOf(response));
  const body = await response.json();
  const ids = (body.data || []).map((m) => String(m.id));
  const wanted = currentCollection();  // ?collection=NAME, as on the other pages
  select.replaceChildren(...ids.map((id) => el("option", { value: id, selected: id === wanted }, id)));
  modelsListed = ids.length > 0;
  box.hidden = !modelsListed;
}

function chosenModel() { return modelsListed ? document.getElementById("model").value : "crag"; }

// The trace of a turn, in the collection it was asked of (the viewer reads ?collection=).
function traceHref(traceId, model) {
  return inCollection(`/ui/trace/${encodeURIComponent(traceId)}`, modelsListed ? model : "");
}

// OpenAI-style server-sent events: "data: {json}" blocks, ending with "data: [DONE]".
async function* chunks(response) {
  for await (const [, data] of sseBlocks(response)) {
    if (data === "[DONE]") return;
    yield JSON.parse(data);
  }
}

// The answer with each [n] as a marker; once the citations are known, a marker holds its
// quote (shown on hover and focus) and a marker for a number no source has stays plain text.
function renderAnswer(node, text, cited) {
  const parts = [];
  const marker = /\[(\d+)\]/g;
  let at = 0, m;
  while ((m = marker.exec(text)) !== null) {
    const c = cited ? cited.get(Number(m[1])) : undefined;
    if (cited && !c) continue;
    parts.push(text.slice(at, m.index), citeMarker(m[0], c));
    at = m.index + m[0].length;
  }
  parts.push(text.slice(at));
  node.replaceChildren(...parts.filter((p) => p !== ""));
}

function citeMarker(label, c) {
  if (!c) return el("span", { class: "cite pending" }, label);
  const source = c.title || c.source || c.url || "";
  const tip = el("span", { class: "quote", role: "tooltip" },
    c.quote ? `“${c.quote}”` : "(no quote)", el("span", { class: "from" }, `— ${source}`),
    c.inferred ? el("span", { class: "from" }, " (placed by the engine)") : null);
  const marker = el("span", { class: "cite", tabindex: "0", "data-cite": c.id }, label, tip);
  marker.addEventListener("mouseenter", () => placeTip(marker));
  marker.addEventListener("focus", () => placeTip(marker));
  return marker;
}

// The quote opens rightwards from its marker, or leftwards when it would leave the window.
function placeTip(marker) {
  const width = marker.querySelector(".quote").offsetWidth || 420;
  marker.classList.toggle("flip", marker.getBoundingClientRect().left + width > document.documentElement.clientWidth - 8);
}

function sourceList(citations) {
  return el("ol", { class: "sources" }, citations.map((c) =>
    el("li", { value: c.id },
      c.url ? el("a", { href: c.url }, c.title || c.url) : (c.title || c.source),
      c.quote ? el("div", { class: "meta quote-line" }, `“${c.quote}”`) : null)));
}

function decisionLine(meta, model) {
  return el("div", { class: "decision" },
    badge(meta.action, meta.refused ? "refused" : "answered"),
    ` confidence ${num(meta.confidence)}`,
    meta.refused ? el("span", { class: "meta" }, " · no answer in the sources") : null,
    " · ", el("a", { class: "trace-link", href: traceHref(meta.trace_id, model) }, `trace ${meta.trace_id}`));
}

function newTurn(question) {
  turnCount += 1;
  const answer = el("div", { class: "answer" });
  const bot = el("div", { class: "msg assistant", "data-state": "waiting" },
    el("div", { class: "meta status" }, "retrieving, grading, correcting…"), answer);
  const turn = el("li", { class: "turn", id: `turn-${turnCount}` }, el("div", { class: "msg user" }, question), bot);
  document.getElementById("turns").append(turn);
  turn.scrollIntoView({ block: "end" });
  return { bot, answer, status: bot.querySelector(".status") };
}

async function send(event) {
  event.preventDefault();
  const form = document.getElementById("chat-form");
  const input = form.elements.message;
  const question = input.value.trim();
  if (!question) return;
  const button = form.querySelector("button");
  button.disabled = true;
  input.value = "";
  const model = chosenModel();
  const messages = conversation.concat([{ role: "user", content: question }]);
  const turn = newTurn(question);
  let text = "";
  const controller = new AbortController();
  answering = controller;
  try {
    const response = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: authHeaders({ "Content-Type": "application/json" }),
      body: JSON.stringify({ model, messages, stream: true }),
      signal: controller.signal,  // aborting closes the connection: the server stops the model
    });
    if (!response.ok) throw new Error(await errorOf(response));
    let meta = null;
    for await (const chunk of chunks(response)) {
      const choice = (chunk.choices || [])[0];
      if (!choice) continue;  // the usage chunk
      if (choice.finish_reason === "error") {
        const e = chunk.error || {};
        throw new Error(`${e.type || "error"}: ${e.message || "the answer failed"}`);
      }
      const delta = choice.delta || {};
      if (delta.content) {
        text += delta.content;
        turn.bot.dataset.state = "streaming";
        turn.status.textContent = "answering…";
        renderAnswer(turn.answer, text, null);
      }
      if (chunk.crag) meta = chunk.crag;
    }
    if (!meta) throw new Error("the stream ended before the answer was complete");
    const cited = new Map((meta.citations || []).map((c) => [Number(c.id), c]));
    renderAnswer(turn.answer, text, cited);
    turn.status.replaceWith(decisionLine(meta, model));
    if (cited.size) turn.bot.append(sourceList(meta.citations));
    turn.bot.dataset.state = "done";
    conversation.push({ role: "user", content: question }, { role: "assistant", content: text });
  } catch (err) {
    if (controller.signal.aborted) return;  // a new conversation dropped this turn
    turn.bot.dataset.state = "error";
    turn.status.replaceChildren(el("span", { class: "error" }, err.message));
    input.value = question;  // nothing was answered: the question is not lost
  } finally {
    if (answering === controller) answering = null;
    button.disabled = false;
    input.focus();
  }
}

function newConversation() {
  if (answering) answering.abort();  // nobody will read the answer being written: stop it
  conversation.length = 0;
  document.getElementById("turns").replaceChildren();
  document.getElementById("chat-form").elements.message.focus();
}

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("chat-form");
  form.addEventListener("submit", send);
  form.elements.message.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {  // IME composition (中文) keeps Enter
      event.preventDefault();
      form.requestSubmit();
    }
  });
  document.getElementById("new-chat").addEventListener("click", newConversation);
  const status = document.getElementById("chat-status");
  loadModels().catch((err) => status.replaceChildren(el("span", { class: "error" }, err.message)));
});
