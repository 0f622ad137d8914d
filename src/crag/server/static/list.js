// The list page: recent traces with filters kept in the URL query (shareable, no secrets).
"use strict";

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
  const link = el("a", { href: `/ui/trace/${encodeURIComponent(t.id)}` }, t.question || "(no question)");
  return el("tr", {},
    el("td", { class: "num" }, when(t.created_at)),
    el("td", {}, statusBadge(t.status)),
    el("td", {}, badge(t.action, t.status)),
    el("td", { class: "num" }, num(t.confidence)),
    el("td", { class: "num" }, ms(t.latency_ms)),
    el("td", {}, t.mode || ""),
    el("td", { class: "q" }, link));
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("filters").addEventListener("submit", (event) => {
    event.preventDefault();
    const query = new URLSearchParams();
    for (const field of event.target.elements) if (field.name && field.value) query.set(field.name, field.value);
    history.replaceState(null, "", `?${query}`);
    loadList();
  });
  loadList();
});
