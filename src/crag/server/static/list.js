// The list page: recent traces with filters kept in the URL query (shareable, no secrets).
"use strict";

// The collections this key may read (GET /v1/collections); a selector when there are several.
async function loadCollections() {
  const select = document.getElementById("collection");
  try {
    const data = await api("/v1/collections");
    const names = data.collections.map((c) => c.name);
    const chosen = [currentCollection(), data.default].find((n) => n && names.includes(n)) || names[0] || "";
    select.replaceChildren(...data.collections.map((c) =>
      el("option", { value: c.name, selected: c.name === chosen }, c.access === "write" ? c.name : `${c.name} (read)`)));
    const several = names.length > 1;
    document.getElementById("collection-box").hidden = !several;
    // Requests name the chosen collection unless it is the one a request naming none gets:
    // a server with one collection keeps its URLs as they were, and a key that may use one
    // collection of several names its own, without a selector to show.
    if (several || chosen !== data.default) select.setAttribute("name", "collection"); else select.removeAttribute("name");
  } catch (_) { /* the list shows the error */ }
}

// The collection requests name: the chosen one, "" when a request naming none gets it.
function chosenCollection() {
  const select = document.getElementById("collection");
  return select.getAttribute("name") ? select.value : "";
}

async function loadList() {
  const form = document.getElementById("filters");
  const params = new URLSearchParams(location.search);
  for (const [name, value] of params) if (form.elements[name]) form.elements[name].value = value;
  const query = new URLSearchParams();
  for (const field of form.elements) if (field.name && field.value) query.set(field.name, field.value);
  const status = document.getElementById("status");
  const body = document.querySelector("#traces tbody");
  status.textContent = "loading…";
  try {
    const data = await api(`/v1/traces?${query}`);
    body.replaceChildren(...data.traces.map(row));
    status.textContent = `${data.traces.length} trace(s)`;
  } catch (err) {
    status.replaceChildren(el("span", { class: "error" }, err.message));
  }
}

function row(t) {
  const link = el("a", { href: inCollection(`/ui/trace/${encodeURIComponent(t.id)}`, chosenCollection()) },
    t.question || "(no question)");
  return el("tr", {},
    el("td", { class: "num" }, when(t.created_at)),
    el("td", {}, statusBadge(t.status)),
    el("td", {}, badge(t.action, t.status)),
    el("td", { class: "num" }, num(t.confidence)),
    el("td", { class: "num" }, ms(t.latency_ms)),
    el("td", {}, t.mode || ""),
    el("td", { class: "q" }, link));
}

document.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("collection").addEventListener("change", () => document.getElementById("filters").requestSubmit());
  document.getElementById("filters").addEventListener("submit", (event) => {
    event.preventDefault();
    const query = new URLSearchParams();
    for (const field of event.target.elements) if (field.name && field.value) query.set(field.name, field.value);
    history.replaceState(null, "", `?${query}`);
    loadList();
  });
  await loadCollections();
  loadList();
});
