"""One spelling of on and off for every environment switch."""

import pytest

from arrayfield._env import CHECK, EXPLAIN_RETRACES, env_flag


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "yes", "on", " On "])
def test_these_values_switch_a_feature_on(monkeypatch, value):
    monkeypatch.setenv(CHECK, value)
    assert env_flag(CHECK)


@pytest.mark.parametrize("value", ["", "0", "false", "No", "off", " "])
def test_these_values_leave_a_feature_off(monkeypatch, value):
    monkeypatch.setenv(EXPLAIN_RETRACES, value)
    assert not env_flag(EXPLAIN_RETRACES)


def test_unset_is_off(monkeypatch):
    monkeypatch.delenv(CHECK, raising=False)
    assert not env_flag(CHECK)


def test_the_documented_names():
    assert (CHECK, EXPLAIN_RETRACES) == (
        "ARRAYFIELD_CHECK",
        "ARRAYFIELD_EXPLAIN_RETRACES",
    )
