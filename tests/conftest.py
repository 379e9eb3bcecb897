import logging

from hypothesis import HealthCheck, settings

logging.getLogger("core").setLevel(logging.INFO)

# The CI machine's speed drifts by 2x within minutes: a per-example deadline or a "too slow" health check would
# fail on the machine's mood, not on our code. Examples are still random, so real bugs are still found.
settings.register_profile("mqgate", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("mqgate")
