import pytest

from raglab.secrets import is_secret_key, redact


@pytest.mark.parametrize("key", ["api_key", "ANTHROPIC_API_KEY", "X-Api-Key", "accessToken",
                                 "Auth_Token", "client_secret", "PASSWORD", "Authorization",
                                 "session.cookie", "secrets", "apikey", "token"])
def test_secret_keys(key):
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["max_tokens", "context_token_budget", "keyword", "k1",
                                 "cache_dir", "tokenizer", "key_count", "prompts", ""])
def test_ordinary_keys(key):
    assert not is_secret_key(key)


def test_redact_keeps_ordinary_settings_and_hides_secret_values():
    cfg = {"context_token_budget": 1500, "generator": {"max_tokens": 512},
           "system": {"headers": {"Authorization": "Bearer x", "Accept": "json"}},
           "empty_token": None, "nested": [{"api_key": "sk"}]}
    assert redact(cfg) == {"context_token_budget": 1500, "generator": {"max_tokens": 512},
                           # a header's value is secret by its name or its look (issue 24)
                           "system": {"headers": {"Authorization": "***", "Accept": "json"}},
                           "empty_token": None, "nested": [{"api_key": "***"}]}


# ---- issue 10: secrets by position and by value ---------------------------------------
from raglab.secrets import Scrubber, ScrubbingStream, redact_url, secret_values  # noqa: E402


@pytest.mark.parametrize("name", ["X-Auth", "Authentication", "Authorization", "X-Api-Key",
                                  "Cookie", "Proxy-Authorization", "X-Session-Id"])
def test_a_header_value_under_a_secret_looking_name_is_secret(name):
    assert redact({"system": {"headers": {name: "s3cr3t-value"}}}) == \
        {"system": {"headers": {name: "***"}}}


@pytest.mark.parametrize("value", ["sk-live-4f9aQ2xYz81KpLm0", "0f3a9c1e2b7d4a5f6e8c9b0a1d2e3f4a",
                                   "123e4567-e89b-12d3-a456-426614174000",
                                   "Bearer eyJhbGciOiJIUzI1NiJ9x"])
def test_a_random_looking_header_value_is_secret_whatever_its_name(value):
    from raglab.secrets import header_secrets

    assert redact({"system": {"headers": {"X-Custom": value}}}) == \
        {"system": {"headers": {"X-Custom": "***"}}}
    assert header_secrets("X-Custom", value)


@pytest.mark.parametrize("value", ["case", "en", "acme-prod", "application/json", "no-cache",
                                   "gzip, deflate", "raglab-eval/1.0", "tenant-42",
                                   "Mozilla/5.0 (X11; Linux x86_64)"])
def test_an_ordinary_header_value_is_no_secret(value):
    """Issue 24, defect 1: ``X-Tenant: case`` was scrubbed everywhere as a substring."""
    from raglab.secrets import header_secrets, override_secrets, secret_values

    assert redact({"system": {"headers": {"X-Tenant": value}}}) == \
        {"system": {"headers": {"X-Tenant": value}}}
    assert not header_secrets("X-Tenant", value)
    assert value not in override_secrets([f"+system.headers.X-Tenant={value}"])
    assert value not in secret_values({"system": {"headers": {"X-Tenant": value}}})


def test_scrub_obj_never_changes_keys():
    """Issue 24, defect 1: a known secret inside a field name (``case`` in ``case_id``)
    left the field name alone; only values are scrubbed."""
    s = Scrubber({"case"}, environment=False)
    assert s.scrub_obj({"case_id": "a case", "cases": ["case-1"]}) == \
        {"case_id": "a ***", "cases": ["***-1"]}


def test_clip_bytes_scrubs_before_cutting(monkeypatch):
    """Issue 24, defect 3: cutting first kept 55 of a 62-character token."""
    import raglab.secrets
    from raglab.secrets import clip_bytes

    token = "tk-" + "a1B2c3D4e5" * 6  # 63 characters
    monkeypatch.setattr(raglab.secrets, "SCRUBBER", Scrubber({token}, environment=False))
    for pad in (0, 10, 65, 110, 200):
        body = ("x" * pad + token + " tail").encode()
        for limit in (40, 120, 200):
            out = clip_bytes(body, limit)
            assert len(out) <= limit
            assert "a1B2c3D4e5a1" not in out and "tk-a1B2" not in out, (pad, limit, out)
    many = (token + ",") * 2000  # shrinks by 60 characters a token once scrubbed
    assert clip_bytes(many.encode(), 200) == ("***," * 50)


@pytest.mark.parametrize("url, shown", [
    ("https://user:pw123@api.example/x", "https://user:***@api.example/x"),
    ("https://api.example/x?api_key=abcd1234&q=1", "https://api.example/x?api_key=***&q=1"),
    ("https://api.example/x?token=abcd1234", "https://api.example/x?token=***"),
    ("https://api.example/x?sig=abcd1234", "https://api.example/x?sig=***"),
    ("https://api.example/x?q=plain", "https://api.example/x?q=plain"),
])
def test_url_credentials_are_redacted(url, shown):
    assert redact_url(url) == shown
    assert redact({"system": {"url": url}}) == {"system": {"url": shown}}


def test_secret_values_cover_headers_urls_env_interpolations_and_bearer_tokens():
    resolved = {"system": {"url": "https://u:pw-7788@h/x?api_key=qk-5566",
                           "headers": {"X-Auth": "xa-1122", "Authorization": "Bearer tk-3344"}},
                "prompt": {"template": "from-env-9900"}, "dataset": {"cases": "/home/me/c"}}
    unresolved = {"system": {"url": "https://u:pw-7788@h/x?api_key=qk-5566",
                             "headers": {"X-Auth": "xa-1122",
                                         "Authorization": "Bearer tk-3344"}},
                  "prompt": {"template": "${oc.env:MY_TEMPLATE}"},
                  "dataset": {"cases": "${oc.env:HOME}/c"}}
    values = secret_values(resolved, unresolved)
    assert {"pw-7788", "qk-5566", "xa-1122", "Bearer tk-3344", "tk-3344",
            "from-env-9900"} <= values
    assert "/home/me/c" not in values  # HOME is a path, not a secret


def test_scrubber_replaces_known_values_and_their_escaped_forms():
    s = Scrubber({'tok"en-1234'}, environment=False)
    import json

    assert s.scrub('echo: tok"en-1234.') == "echo: ***."
    assert s.scrub(json.dumps({"e": 'tok"en-1234'})) == '{"e": "***"}'
    assert s.scrub_obj({"a": ['x tok"en-1234']}) == {"a": ["x ***"]}
    assert s.scrub("nothing") == "nothing"


def test_scrubber_reads_secret_environment_variables(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000")
    monkeypatch.setenv("MY_TOKEN", "my-token-value")
    s = Scrubber()
    assert s.scrub("sk-ant-test-0000 and my-token-value") == "*** and ***"


def test_scrubbing_stream():
    import io

    buf = io.StringIO()
    ScrubbingStream(buf, Scrubber({"hidden-9"}, environment=False)).write("a hidden-9 b")
    assert buf.getvalue() == "a *** b"


def test_override_secrets_are_known_before_composition():
    from raglab.secrets import override_secrets

    got = override_secrets(["+system.headers.X-Auth=xa-1234", "k=5",
                            "+system.headers.Authorization=Bearer tk-5678",
                            "system.url=https://u:pw-9999@h/", "grader.api_key=ak-0001"])
    assert {"xa-1234", "tk-5678", "pw-9999", "ak-0001"} <= got and "5" not in got


def test_a_digits_only_secret_echoed_as_a_json_number_is_scrubbed_from_a_record(monkeypatch):
    """A system that echoes a numeric token back as a number: the record line (found by
    the byte check, then scrubbed value by value) holds ``***``; a metric whose digits
    merely contain the token keeps its value."""
    import json

    import raglab.secrets
    from raglab.data.record import CaseRecord
    from raglab.runner import records

    s = Scrubber({"98765432101"}, environment=False)
    assert s.scrub_obj({"echo": 98765432101, "f": 0.98765432101, "n": 7, "b": True}) == \
        {"echo": "***", "f": 0.98765432101, "n": 7, "b": True}
    monkeypatch.setattr(raglab.secrets, "SCRUBBER", Scrubber({"55667788990"}, environment=False))
    rec = CaseRecord.model_validate({
        "case_id": "c", "gold": {"answerable": True},
        "output": {"case_id": "c", "usage": {"account": 55667788990}},
        "metrics": {"m": 0.155667788990}})
    line = json.loads(records.record_line(rec, finite=True))
    assert line["output"]["usage"]["account"] == "***"
    assert line["metrics"]["m"] == 0.155667788990


def test_json_files_stay_valid_json_when_a_secret_is_made_of_digits(tmp_path, monkeypatch):
    """Scrubbing the text of a JSON file cut numbers apart (``"n": 1500`` became
    ``"n": ***``, and metrics.json could not be read); JSON is scrubbed value by value:
    strings lose the secret, raglab's own figures keep their values, and rows (which may
    hold what a system answered) lose a number that is the secret."""
    import json

    import raglab.secrets
    from raglab.data.io import atomic_write_json, write_jsonl

    monkeypatch.setattr(raglab.secrets, "SCRUBBER", Scrubber({"1500"}, environment=False))
    atomic_write_json(tmp_path / "m.json", {"n_cases": 1500, "p": 0.1500, "w": ["key 1500"]})
    assert json.loads((tmp_path / "m.json").read_text()) == \
        {"n_cases": 1500, "p": 0.15, "w": ["key ***"]}
    write_jsonl(tmp_path / "r.jsonl", [{"echo": 1500, "t": "a1500"}])
    assert json.loads((tmp_path / "r.jsonl").read_text()) == {"echo": "***", "t": "a***"}
