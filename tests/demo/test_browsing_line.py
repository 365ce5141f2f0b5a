"""The line the demo prints about what it leaves running agrees with how many things that is."""

from __future__ import annotations

from inferensics.demo.runner import _browsing_line


def test_one_child_stays_up_two_stay_up() -> None:
    assert _browsing_line(["service"]) == "service stays up for browsing until Ctrl-C"
    assert _browsing_line(["service", "dashboard"]) == "service and dashboard stay up for browsing until Ctrl-C"
