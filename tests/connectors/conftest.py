from tests.core.conftest import make_broker  # noqa: F401  (the in-process broker fixture, shared)
