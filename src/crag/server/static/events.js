// Generated from crag.event_names by scripts/gen_events_js.py: do not edit.
// The names of a run's events and the reasons an escalation gives, for the other scripts.
"use strict";

const EVENT = Object.freeze({
  "CONDENSE": "condense",
  "QUERY": "query",
  "CACHE": "cache",
  "RETRIEVE": "retrieve",
  "EVALUATE": "evaluate",
  "DECIDE": "decide",
  "VERIFY": "verify",
  "ESCALATE": "escalate",
  "REFINE": "refine",
  "REWRITE": "rewrite",
  "SEARCH": "search",
  "REFINE_EXTERNAL": "refine_external",
  "ROUNDS": "rounds",
  "CORRECT": "correct",
  "FUSE": "fuse",
  "COMPRESS": "compress",
  "BEARERS": "bearers",
  "ABSTAIN": "abstain",
  "TOKEN": "token",
  "REPLACE": "replace",
  "GENERATE": "generate",
  "ANSWER": "answer",
  "CONTEXT": "context",
  "STARTED": "started",
  "DONE": "done",
  "ERROR": "error"
});

const REJECTED = Object.freeze({
  "UNVERIFIED": "not verified",
  "SHARED_NAME": "shared name"
});
