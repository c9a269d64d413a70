"""What apprise said of a failed ntfy delivery, its topic masked only where it is named."""

from __future__ import annotations

import apprise

from opsrunner.schedule.notify import _unsaid


def test_a_topic_is_masked_where_it_is_named_not_inside_other_words() -> None:
    """Topic `error`: masked in 'error' and /error, never in `Internal server error.`"""
    plugin = apprise.Apprise.instantiate("ntfy://127.0.0.1:9/error", suppress_exceptions=True)
    said = "Failed to send ntfy notification to topic 'error': Internal server error. (http://127.0.0.1:9/error)"
    assert _unsaid(said, plugin) == ("Failed to send ntfy notification to topic 'e...r': Internal server error. "
                                     "(http://127.0.0.1:9/e...r)")
