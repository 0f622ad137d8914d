// The detail page: one trace as the CRAG pipeline, and a replay shown side by side.
"use strict";

// The pipeline's phases and the spans of each (spans are named by their step's event, events.js).
const PHASES = [
  [EVENT.RETRIEVE, [EVENT.RETRIEVE]],
  [EVENT.EVALUATE, [EVENT.EVALUATE]],
  [EVENT.DECIDE, []],
  [EVENT.CORRECT, [EVENT.REFINE, EVENT.REWRITE, EVENT.SEARCH, EVENT.REFINE_EXTERNAL, EVENT.FUSE]],
  [EVENT.GENERATE, [EVENT.BEARERS, EVENT.GENERATE]],
];

function list(value) { return Array.isArray(value) ? value.filter((v) => v && typeof v === "object") : []; }

function section(title, ...content) { return el("div", { class: "card" }, el("h2", {}, title), ...content); }

function header(t) {
  const th = t.thresholds || {};
  const timings = t.timings || {};
  return el("div", { class: "card" },
    el("h1", {}, t.question || "(no question)"),
    el("div", {}, statusBadge(t.status), " ", badge(t.action, t.status), "  confidence ", el("strong", {}, num(t.confidence)),
      th.upper !== undefined ? ` (upper ${num(th.upper)}, lower ${num(th.lower)}${th.rule ? ", " + th.rule : ""})` : ""),
    el("div", { class: "meta" },
      `trace ${t.id || "?"} · ${when(t.created_at)} · mode ${t.mode || "?"}`,
      t.evaluator ? ` · evaluator ${t.evaluator}` : "",
      ` · total ${ms((timings.total || 0) * 1000)}`),
    t.evaluation_reason ? el("div", { class: "meta" }, String(t.evaluation_reason)) : null,
    t.cache && t.cache.hit ? el("div", { class: "meta" }, `answered from the answer cache: first answered in trace ${t.cache.from_trace}`) : null,
    escalated(t.escalated));
}

// Correct at first, but the reply found no answer in the documents: searched and asked again.
function escalated(e) {
  if (!e || typeof e !== "object") return null;
  if (e.rejected === REJECTED.UNVERIFIED) {  // before generation: correction.verify_correct
    return el("div", { class: "meta" },
      `escalated from ${e.from || "?"}: ${REJECTED.UNVERIFIED} (P(yes) ${e.probability} < ${e.threshold}): ` +
      "the model did not read the answer in the documents graded relevant");
  }
  if (e.rejected === REJECTED.SHARED_NAME) {  // before generation: correction.search_shared_names
    return el("div", { class: "meta" },
      `escalated from ${e.from || "?"}: ${e.bearers} people named ${e.name} in the documents ` +
      "and the question does not say which: searched outside too");
  }
  return el("div", { class: "meta" },
    `escalated from ${e.from || "?"}: the first reply was ${e.rejected || "refused"}`,
    e.reply ? ` (“${String(e.reply).slice(0, 160)}”)` : "");
}

function problems(t) {
  const items = [];
  for (const key of ["degradations", "errors"]) {
    for (const item of Array.isArray(t[key]) ? t[key] : []) items.push(el("li", {}, `${key.slice(0, -1)}: ${item}`));
  }
  if (t.cancelled) items.push(el("li", {}, `cancelled: ${t.cancelled}`));
  return items.length ? el("div", { class: "problems" }, el("strong", {}, "Degraded"), el("ul", {}, items)) : null;
}

function timeline(t) {
  const spans = list(t.spans);
  const byName = {};
  for (const s of spans) byName[s.name] = (byName[s.name] || 0) + (Number(s.duration_ms) || 0);
  const stages = [];
  PHASES.forEach(([phase, names], i) => {
    const used = names.filter((n) => n in byName);
    const ran = phase === EVENT.DECIDE ? Boolean(t.action) && t.action !== "rag" : used.length > 0;
    const total = used.reduce((sum, n) => sum + byName[n], 0);
    const detail = phase === EVENT.DECIDE ? (t.action || "–") : used.map((n) => `${n} ${ms(byName[n])}`).join(", ");
    if (i) stages.push(el("span", { class: "arrow" }, "→"));
    stages.push(el("div", { class: `stage${ran ? "" : " skipped"}` },
      el("div", { class: "name" }, phase), el("div", {}, phase === EVENT.DECIDE ? "" : ms(total)),
      el("div", { class: "meta" }, ran ? detail : "skipped")));
  });
  const longest = Math.max(1, ...spans.map((s) => Number(s.duration_ms) || 0));
  const bars = el("div", { class: "bars" });
  for (const s of spans) {
    const width = Math.max(0.5, (100 * (Number(s.duration_ms) || 0)) / longest);
    const bar = el("div", { class: `bar${s.error ? " err" : ""}`, title: s.error || "" });
    bar.style.width = `${width}%`;
    bars.append(el("div", {}, `${"· ".repeat(Number(s.depth) || 0)}${s.name}`), el("div", {}, bar),
      el("div", { class: "num" }, ms(s.duration_ms)));
  }
  return section("Pipeline", el("div", { class: "pipeline" }, stages), bars);
}

function gradeCell(score) {
  if (typeof score !== "number") return el("td", { class: "num" }, "–");
  return el("td", { class: `num ${score >= 0.5 ? "grade-hi" : "grade-lo"}` }, num(score));
}

function link(text, url) { return safeUrl(url) ? el("a", { href: url, rel: "noopener noreferrer" }, text) : text; }

function retrieved(t) {
  const hits = list(t.retrieved);
  if (!hits.length) return null;
  const grades = {};
  for (const g of list(t.grades)) grades[String(g.id)] = g;
  const rows = hits.map((h, i) => {
    const g = grades[String(h.id)] || {};
    return el("tr", {},
      el("td", { class: "num" }, h.rank || i + 1),
      el("td", {}, link(h.title || h.source || h.id || "", h.url), el("div", { class: "meta" }, h.source || "")),
      el("td", { class: "num" }, num(h.score, 3)), el("td", { class: "num" }, num(h.dense)),
      el("td", { class: "num" }, num(h.keyword)), gradeCell(g.score),
      el("td", { class: "text" }, clip(h.text, 400), g.reason ? el("div", { class: "meta" }, g.reason) : null));
  });
  return section("Retrieved documents",
    el("table", {}, el("thead", {}, el("tr", {}, ["#", "source", "score", "dense", "bm25", "grade", "text / reason"]
      .map((h) => el("th", {}, h)))), el("tbody", {}, rows)));
}

function queries(t) {
  const qs = Array.isArray(t.queries) ? t.queries : [];
  return qs.length ? section("Rewritten queries", el("ul", {}, qs.map((q) => el("li", {}, q)))) : null;
}

function external(t) {
  const results = list(t.external);
  if (!results.length) return null;
  return section("External results", el("table", {}, el("tbody", {}, results.map((r) => el("tr", {},
    el("td", {}, r.provider || ""),
    el("td", {}, link(r.title || r.url || "", r.url), el("div", { class: "meta" }, r.query ? `query: ${r.query}` : "")),
    el("td", { class: "text" }, clip(r.content, 400)))))));
}

function strips(t) {
  const items = list(t.strips);
  if (!items.length) return null;
  return section("Knowledge strips", el("table", {}, el("tbody", {}, items.map((s) => el("tr", { class: s.kept ? "" : "dropped-row" },
    el("td", { class: s.kept ? "kept" : "dropped" }, s.kept ? "✓ kept" : "✗ dropped"),
    el("td", { class: "num" }, num(s.score)), el("td", {}, `${s.origin || ""} ${s.source || ""}`),
    el("td", { class: "text" }, clip(s.text, 400)))))));
}

function context(t) {
  const items = list(t.context);
  if (!items.length) return null;
  return section("Final context", el("ol", {}, items.map((c) => el("li", {},
    el("span", { class: "meta" }, `[${c.origin || "?"}] ${c.title || c.source || ""}`), el("div", { class: "text" }, clip(c.text, 800))))));
}

// The answer with each [n] turned into a link to source n (anchors are prefixed per column).
function answer(t, prefix) {
  const cites = list(t.citations);
  const known = new Set(cites.map((c) => String(c.id)));
  const body = el("div", { class: "answer" });
  const text = String(t.answer || "");
  let last = 0;
  for (const m of text.matchAll(/\[(\d{1,3})\]/g)) {
    body.append(text.slice(last, m.index));
    body.append(known.has(m[1]) ? el("a", { class: "cite", href: `#${prefix}-cite-${m[1]}` }, m[0]) : m[0]);
    last = m.index + m[0].length;
  }
  body.append(text.slice(last));
  const sources = el("ol", {}, cites.map((c) => el("li", { id: `${prefix}-cite-${c.id}`, value: c.id },
    link(c.title || c.source || "", c.url), " ", el("span", { class: "meta" }, c.url || c.source || ""))));
  return section("Answer", body, cites.length ? el("h2", {}, "Sources") : null, cites.length ? sources : null);
}

// A name several people share: who the sources describe, and whom the answer is about.
function bearers(t) {
  const b = t.bearers;
  if (!b || typeof b !== "object" || list(b.bearers).length < 2) return null;
  const note = b.several
    ? `${list(b.bearers).length} people named ${b.name || "?"} in the sources: the answer names each` +
      (b.asks_who ? "" : ", then answers for each from its own sources")
    : `the question names one of them (“${b.asked || ""}”): one answer, from its sources only`;
  const items = list(b.bearers).map((x, i) => el("li", { class: b.chosen === i ? "kept" : "" },
    el("strong", {}, x.description || x.disambiguator || x.name || ""), x.life ? ` (${x.life})` : "",
    " ", el("span", { class: "meta" }, (Array.isArray(x.cites) ? x.cites : []).map((n) => `[${n}]`).join(" ")),
    b.chosen === i ? el("span", { class: "meta" }, " ← named by the question") : null,
    x.quote ? el("div", { class: "meta" }, clip(x.quote, 300)) : null));
  return section("People of the same name", el("div", { class: "meta" }, note), el("ol", {}, items));
}

function clip(value, limit) {
  const text = String(value || "");
  return text.length > limit ? text.slice(0, limit - 1) + "…" : text;
}

function renderTrace(t, prefix) {
  return el("div", {}, header(t), problems(t), timeline(t), answer(t, prefix), bearers(t), retrieved(t), queries(t),
    external(t), strips(t), context(t));
}

function traceId() {
  const parts = location.pathname.split("/");
  return decodeURIComponent(parts[parts.length - 1] || "");
}

async function load() {
  document.querySelector("header.top a").setAttribute("href", inCollection("/ui"));  // back to this collection
  const view = document.getElementById("view");
  const status = document.getElementById("status");
  try {
    const t = await api(inCollection(`/v1/traces/${encodeURIComponent(traceId())}`));
    document.title = `crag · ${t.question || t.id}`;
    view.replaceChildren(renderTrace(t, "a"));
  } catch (err) {
    status.replaceChildren(el("span", { class: "error" }, err.message));
  }
}

async function replay() {
  const button = document.getElementById("replay");
  const status = document.getElementById("status");
  button.disabled = true;
  status.textContent = "replaying… (a local model can take a minute)";
  try {
    const data = await api(inCollection(`/v1/traces/${encodeURIComponent(traceId())}/replay`), { method: "POST" });
    const right = data.replay || { question: data.answer.question, answer: data.answer.answer, action: data.answer.action };
    document.getElementById("view").replaceChildren(el("div", { class: "compare" },
      el("section", {}, el("h2", {}, "Original"), renderTrace(data.original, "a")),
      el("section", {}, el("h2", {}, "Replay ", el("a", { href: inCollection(`/ui/trace/${encodeURIComponent(right.id || "")}`) }, right.id || "")),
        renderTrace(right, "b"))));
    status.textContent = "";
  } catch (err) {
    status.replaceChildren(el("span", { class: "error" }, err.message));
  } finally {
    button.disabled = false;
  }
}

document.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("replay").addEventListener("click", replay);
  await keyCollectionReady();
  load();
});
