"""One hierarchy for the store's errors: every exception class of core/store derives from StoreError, those of the
compiled modules included (they raise classes of core/store/errors.py), and input errors stay ValueErrors."""

import importlib
import inspect
import pkgutil

import pytest

import core.store
from core.store.errors import InvalidMessageIdError, RecordFormatError, StoreError
from core.store.log.record_codec import decode_record
from core.store.message_id import decode_offset_msg_id


def store_exception_classes() -> list[type[BaseException]]:
    found = []
    for module_info in pkgutil.walk_packages(core.store.__path__, "core.store."):
        module = importlib.import_module(module_info.name)
        found += [
            value
            for value in vars(module).values()
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__
        ]
    return found


def test_every_exception_class_of_the_store_is_a_store_error():
    classes = store_exception_classes()
    assert {RecordFormatError, InvalidMessageIdError} <= set(classes)
    assert [cls for cls in classes if not issubclass(cls, StoreError)] == []


def test_the_codec_s_and_the_ids_errors_are_store_errors_and_value_errors():
    with pytest.raises(RecordFormatError) as raised:
        decode_record(b"\0" * 8, 0, 8)
    assert isinstance(raised.value, StoreError) and isinstance(raised.value, ValueError)
    with pytest.raises(InvalidMessageIdError) as raised_id:
        decode_offset_msg_id("not hex")
    assert isinstance(raised_id.value, StoreError) and isinstance(raised_id.value, ValueError)
