"""What `mqgate serve` sets in its interpreter (and the in-process benchmarks with it): the young-generation GC
threshold and the GIL switch interval, whose reasons mqgate/server.py gives with their measurements."""

from __future__ import annotations

import gc
import sys

from mqgate.server import GC_YOUNG_THRESHOLD, SWITCH_INTERVAL_S, apply_interpreter_settings


def test_the_server_s_interpreter_settings_are_applied_together() -> None:
    threshold, interval = gc.get_threshold(), sys.getswitchinterval()
    try:
        apply_interpreter_settings()
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *threshold[1:])
        assert abs(sys.getswitchinterval() - SWITCH_INTERVAL_S) < 1e-6
    finally:
        gc.set_threshold(*threshold)
        sys.setswitchinterval(interval)
