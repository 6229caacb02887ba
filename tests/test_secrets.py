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
                           "system": {"headers": {"Authorization": "***", "Accept": "json"}},
                           "empty_token": None, "nested": [{"api_key": "***"}]}
