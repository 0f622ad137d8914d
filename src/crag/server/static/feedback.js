// 👍/👎 on the trace page: POST /v1/feedback, then show the stored rating and, for a 👎 whose
// context was all graded relevant, the "likely grader miss" flag that `crag feedback export` sets.
"use strict";

function feedbackTraceId() {
  const parts = location.pathname.split("/");
  return decodeURIComponent(parts[parts.length - 1] || "");
}

function showFeedback(fb) {
  for (const [id, value] of [["rate-up", "up"], ["rate-down", "down"]]) {
    const button = document.getElementById(id);
    button.setAttribute("aria-pressed", String(fb.rating === value));
    button.classList.toggle("chosen", fb.rating === value);
  }
  const rating = document.getElementById("rating");
  if (!fb.rating) rating.textContent = "not rated yet";
  else rating.textContent = `rated ${fb.rating === "up" ? "👍 up" : "👎 down"}${fb.comment ? ` — “${fb.comment}”` : ""}`;
  showExport(fb);
  const miss = document.getElementById("grader-miss");
  miss.hidden = !fb.likely_grader_miss;
  if (fb.likely_grader_miss) {
    const grades = (fb.context_grades || []).map((g) => num(g)).join(", ");
    miss.replaceChildren(el("strong", {}, "Likely grader miss"),
      el("div", {}, `Every passage the generator saw was graded relevant (${grades}), yet the answer was rated 👎 bad. ` +
        "`crag feedback export` labels these passages not relevant, so a retrained evaluator learns from it."));
  }
}

// What `crag feedback export` will write for this rating, and what it holds for review because
// the evidence contradicts the label (a 👎 on an answer whose cited passage holds its claim).
function showExport(fb) {
  const box = document.getElementById("feedback-export");
  if (!box) return;
  const pairs = fb.pairs || [], review = fb.review || [];
  box.hidden = !fb.rating;
  const item = (p, extra) => el("li", {}, el("strong", {}, p.label ? "relevant" : "not relevant"), " · ",
    String(p.source || ""), extra ? el("span", { class: "meta" }, ` — held for review: ${extra}`) : "");
  box.replaceChildren(
    el("div", {}, el("strong", {}, `Export: ${pairs.length} pair(s)`),
      review.length ? ` · ${review.length} held for review` : ""),
    el("ul", {}, ...pairs.map((p) => item(p)), ...review.map((p) => item(p, p.review))));
}

async function loadFeedback() {
  try {
    showFeedback(await api(inCollection(`/v1/feedback/${encodeURIComponent(feedbackTraceId())}`)));
  } catch (err) {
    document.getElementById("rating").replaceChildren(el("span", { class: "error" }, err.message));
  }
}

async function rate(value) {
  const buttons = document.querySelectorAll("#feedback button.rate");
  buttons.forEach((b) => { b.disabled = true; });
  const comment = document.getElementById("rate-comment").value.trim();
  try {
    const body = { trace_id: feedbackTraceId(), rating: value };
    if (comment) body.comment = comment;
    if (currentCollection()) body.collection = currentCollection();
    showFeedback(await api("/v1/feedback", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    }));
  } catch (err) {
    document.getElementById("rating").replaceChildren(el("span", { class: "error" }, err.message));
  } finally {
    buttons.forEach((b) => { b.disabled = false; });
  }
}

document.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("rate-up").addEventListener("click", () => rate("up"));
  document.getElementById("rate-down").addEventListener("click", () => rate("down"));
  await keyCollectionReady();
  loadFeedback();
});
