// The list page's "Ask" box: POST /v1/ask with stream=true and show the run as it happens:
// each pipeline step as it finishes, then the answer a verified sentence at a time, then its sources
// (each with the quote of its source that holds the claim, shown on hover).
// Everything is built with text nodes (el), as in the rest of the viewer. Event names come
// from events.js (EVENT.*), generated from the server's own list.
"use strict";

function describe(name, d) {
  const n = (xs) => (Array.isArray(xs) ? xs.length : 0);
  switch (name) {
    case EVENT.QUERY: return `${d.language || "?"}${d.query_type ? `, ${d.query_type}` : ""}`;
    case EVENT.CACHE: return [badge(d.action), ` from the answer cache (first answered in trace ${d.from_trace})`];
    case EVENT.RETRIEVE: return `${n(d.documents)} document(s)`;
    case EVENT.EVALUATE: return `confidence ${num(d.confidence)} (${d.evaluator || "evaluator"})`;
    case EVENT.DECIDE: return [badge(d.action), ` confidence ${num(d.confidence)}`];
    case EVENT.REFINE: case EVENT.REFINE_EXTERNAL: return `${n(d.kept)} strip(s) kept of ${d.graded || 0}`;
    case EVENT.REWRITE: return (d.queries || []).join("; ");
    case EVENT.SEARCH: return `${n(d.results)} result(s)`;
    case EVENT.ROUNDS: return `${d.rounds} round(s), ${d.stopped || ""}`;
    case EVENT.CORRECT: return `${d.internal} internal, ${d.external} external`;
    case EVENT.FUSE: case EVENT.COMPRESS: return `${n(d.context)} in context`;
    case EVENT.BEARERS:
      if (n(d.bearers) < 2) return "";
      return d.several ? `${n(d.bearers)} people named ${d.name}: each is answered for` : `the question names one of ${n(d.bearers)} ${d.name}`;
    case EVENT.REPLACE: return `answer replaced (${d.reason})`;
    case EVENT.GENERATE: return `${n(d.citations)} citation(s)${d.refused ? ", refused" : ""}`;
    case EVENT.ABSTAIN: return "nothing reliable found: no guess";
    default: return "";
  }
}

// /v1/ask's server-sent events: [event name, parsed data].
async function* sseEvents(response) {
  for await (const [name, data] of sseBlocks(response)) yield [name, JSON.parse(data)];
}

async function ask(event) {
  event.preventDefault();
  const form = event.target;
  const box = document.getElementById("ask");
  const stages = document.getElementById("ask-stages");
  const answer = document.getElementById("ask-answer");
  const sources = document.getElementById("ask-sources");
  const status = document.getElementById("ask-status");
  const button = form.querySelector("button");
  stages.replaceChildren(); answer.textContent = ""; sources.replaceChildren(); status.textContent = "asking…";
  box.dataset.state = "running";
  button.disabled = true;
  const headers = { "Content-Type": "application/json" };
  const key = sessionStorage.getItem(KEY_NAME);
  if (key) headers["Authorization"] = `Bearer ${key}`;
  try {
    const body = { question: form.elements.question.value, mode: form.elements.mode.value, stream: true };
    const collection = chosenCollection();
    if (collection) body.collection = collection;
    const response = await fetch("/v1/ask", { method: "POST", headers, body: JSON.stringify(body) });
    if (!response.ok) {
      let message = `HTTP ${response.status}`;
      try { const e = await response.json(); message = `${e.error.type}: ${e.error.message}`; } catch (_) { /* keep */ }
      throw new Error(message);
    }
    for await (const [name, data] of sseEvents(response)) {
      if (name === EVENT.TOKEN) {
        box.dataset.state = "streaming";
        answer.textContent += data.delta;
      } else if (name === EVENT.REPLACE) {
        answer.textContent = data.text || "";
        stages.append(el("li", {}, el("span", { class: "name" }, name), " ", describe(name, data)));
      } else if (name === EVENT.DONE) {
        answer.textContent = data.answer;
        for (const c of data.citations || []) {
          const item = el("li", { title: c.quote ? `“${c.quote}”` : "" }, `[${c.id}] `,
            c.url ? el("a", { href: c.url }, c.title || c.url) : (c.title || c.source),
            c.inferred ? el("span", { class: "meta" }, " (placed by the engine)") : "");
          if (c.quote) item.append(el("div", { class: "meta quote" }, `“${c.quote}”`));
          sources.append(item);
        }
        const link = inCollection(`/ui/trace/${encodeURIComponent(data.trace_id)}`, collection);
        status.replaceChildren("trace ", el("a", { href: link }, data.trace_id));
        box.dataset.state = "done";
        if (typeof loadList === "function") loadList();
      } else if (name === EVENT.ERROR) {
        throw new Error(`${data.error.type}: ${data.error.message}`);
      } else if (name !== EVENT.STARTED) {
        stages.append(el("li", {}, el("span", { class: "name" }, name), " ", describe(name, data)));
      }
    }
  } catch (err) {
    status.replaceChildren(el("span", { class: "error" }, err.message));
    box.dataset.state = "error";
  } finally {
    button.disabled = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("ask-form").addEventListener("submit", ask);
});
