"""Secrets in forms the exact-value check missed: another case, a URL's credentials.

A key pasted into a question reached the trace lowercased (the rewritten search queries are
lowercase), and a known value was only matched as written. A token written as a URL's user
name (``http://TOKEN@host/v1``) or as ``?access_key=`` in a configured URL has no key shape,
so the error naming ``llm.base_url`` printed it, and the trace kept it.
"""

from __future__ import annotations

import pytest

from crag.config import CragSettings
from crag.correct.rewrite import keyword_queries
from crag.engine import CRAG
from crag.errors import CragError
from crag.redact import StreamRedactor, redact, redact_text, url_secrets
from crag.types import Query

pytestmark = pytest.mark.unit

KEY = "zq7CanaryKeyValue99"


def test_a_known_key_is_redacted_in_any_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for text in (f"x {KEY.lower()} y", f"X {KEY.upper()} Y", f"{KEY} and {KEY.lower()}"):
        out = redact_text(text)
        assert KEY.lower() not in out.lower() and "***" in out
    stream = StreamRedactor()
    out = stream.push(f"my key {KEY.lower()[:7]}") + stream.push(f"{KEY.lower()[7:]} ok") + stream.flush()
    assert KEY.lower() not in out.lower()


def test_a_key_pasted_into_the_question_leaves_no_lowercased_query(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    question = f"My key {KEY} fails; when did the Harbour Museum open?"
    queries = keyword_queries(Query(question, "en"), ["The museum opened in 1901."])
    assert any(KEY.lower() in q.lower() for q in queries)  # what the trace records as "queries"
    assert KEY.lower() not in str(redact({"queries": queries})).lower()


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        ("http://tok3nSecretValue@127.0.0.1:1/v1", "tok3nSecretValue"),
        ("http://user:pa55-Word-9@127.0.0.1:1/v1", "pa55-Word-9"),
        ("http://127.0.0.1:1/v1?access_key=acc3ssValue77", "acc3ssValue77"),
        ("http://127.0.0.1:1/v1?sig=s1gnatureValue", "s1gnatureValue"),
    ],
)
def test_credentials_in_a_configured_url_never_show(url: str, secret: str) -> None:
    assert secret in url_secrets(url)
    settings = CragSettings(llm={"backend": "openai", "base_url": url, "model": "m", "retries": 0, "timeout": 2})
    engine = CRAG(settings)
    with pytest.raises(CragError) as info:
        engine.llm.complete([{"role": "user", "content": "hi"}])
    assert "llm.base_url" in str(info.value) and secret not in str(info.value)
    assert secret not in redact_text(f"llm.base_url = {url}")


def test_plain_urls_and_bad_urls_give_no_secret() -> None:
    assert url_secrets("http://127.0.0.1:8080/v1?q=museum&lang=en") == []
    assert url_secrets("https://api.tavily.com") == []
    assert url_secrets("http://[::1:8080/v1") == []


@pytest.mark.parametrize("key", ["tvly-dev-Zr7Qp/4mWx9KtLb2Nc", "ZephyrKite/BlueSecretValue", "pässwört-Ключ 42"])
def test_a_known_key_is_redacted_in_every_form_it_is_echoed_in(monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    import base64
    import html
    import json
    import urllib.parse

    monkeypatch.setenv("SEARCH_GATEWAY_TOKEN", key)
    raw = key.encode()
    forms = [
        json.dumps(key)[1:-1].replace("/", "\\/"),  # PHP's json_encode
        json.dumps(key, ensure_ascii=True)[1:-1].replace("/", "\\u002f"),
        json.dumps(key)[1:-1].replace("/", "\\/").replace("\\", "\\\\"),  # escaped again: backslashes doubled
        urllib.parse.quote(key, safe=""),
        urllib.parse.quote_plus(key).lower(),
        "".join(f"&#{ord(c)};" if c in "/ " else html.escape(c) for c in key),
        base64.b64encode(b"user:" + raw).decode(),
        base64.b64encode(b"ab:" + raw).decode(),
        base64.urlsafe_b64encode(b"a:" + raw + b"?").decode(),
        key.upper(),
    ]
    for form in forms:
        out = redact_text(f"provider said: bad key {form} (check it)")
        assert out.startswith("provider said: bad key ***") and out.endswith(" (check it)"), (form, out)
    stream = StreamRedactor()
    echoed = forms[0]
    out = stream.push(f"bad key {echoed[:9]}") + stream.push(f"{echoed[9:]} ok") + stream.flush()
    assert out == "bad key *** ok"


def test_forms_of_a_key_spare_ordinary_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEARCH_GATEWAY_TOKEN", "ZephyrKite/BlueSecretValue")
    text = (
        'The Zephyr kite is blue. {"path": "a\\/b", "q": "x%2Fy"} &amp; &#47; '
        "dGhlIHF1aWNrIGJyb3duIGZveA== Basic dXNlcjpwYXNz https://example.org/a+b"
    )
    assert redact_text(text) == text
