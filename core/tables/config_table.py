"""Named configurations kept in one JSON file (RocketMQ's ConfigManager): topics.json, subscriptionGroup.json.

Readers never lock: the table is a dict that is replaced, never changed in place, so a reader sees the table
before or after a change. Changes hold a lock, write the file (core.tables.json_file: atomic, with a backup), and only
then publish the new table, so a failed write changes nothing.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from core.errors import ConfigFileError
from core.tables.json_file import DataVersion, read_table, write_json


class JsonConfig(Protocol):
    def to_json(self) -> dict[str, object]: ...


C = TypeVar("C", bound=JsonConfig)


class ConfigTable(Generic[C]):
    def __init__(
        self,
        path: Path,
        table_key: str,
        name_field: str,
        name_of: Callable[[C], str],
        from_json: Callable[[Mapping[str, object]], C],
        entry_error: type[Exception],
    ) -> None:
        self.path = path
        self.table_key = table_key
        self.name_field = name_field
        self.name_of = name_of
        self.from_json = from_json
        self.entry_error = entry_error
        self._lock = threading.Lock()
        self._table: dict[str, C] = {}
        self._version = DataVersion()
        self._change_listeners: list[Callable[[], None]] = []
        self._load()

    def _load(self) -> None:
        loaded = read_table(self.path, self.table_key)
        if loaded is None:
            return
        raw_table, version = loaded
        table: dict[str, C] = {}
        for key, entry in raw_table.items():
            where = f"{self.table_key}[{key!r}]"
            if not isinstance(entry, dict):
                raise ConfigFileError(self.path, f"{where} must be an object, found {entry!r}")
            try:
                config = self.from_json(entry)
            except self.entry_error as exc:
                raise ConfigFileError(self.path, f"{where}: {exc}") from exc
            if self.name_of(config) != key:
                raise ConfigFileError(
                    self.path, f"{where} holds {self.name_field} {self.name_of(config)!r}; the two must be equal"
                )
            table[key] = config
        self._table = table
        self._version = version

    @property
    def data_version(self) -> DataVersion:
        return self._version

    def add_change_listener(self, listener: Callable[[], None]) -> None:
        """Call `listener()` after each change, once the new table is what readers get: in the thread that made
        the change, under the table's lock (so one call at a time). Readers that cache what they derive from the
        table drop it there, instead of comparing data versions on every read."""
        self._change_listeners.append(listener)

    def get(self, name: str) -> C | None:
        return self._table.get(name)

    def list(self) -> builtins.list[C]:
        """Every configuration, sorted by name."""
        table = self._table
        return [table[name] for name in sorted(table)]

    def __len__(self) -> int:
        return len(self._table)

    def put(self, config: C) -> bool:
        """Store `config`; False (no write, same data version) when it equals the current one."""
        name = self.name_of(config)
        with self._lock:
            if self._table.get(name) == config:
                return False
            self._commit({**self._table, name: config})
        return True

    def delete(self, name: str) -> bool:
        with self._lock:
            if name not in self._table:
                return False
            self._commit({key: config for key, config in self._table.items() if key != name})
        return True

    def add_if_absent(self, config: C) -> tuple[C, bool]:
        """(the stored configuration, whether `config` was added): creation happens once however many threads
        ask at the same moment. RocketMQ checks and creates without re-checking under its lock, so two senders
        can each create a topic and the second overwrites the first; the second look-up here prevents that."""
        name = self.name_of(config)
        with self._lock:
            current = self._table.get(name)
            if current is not None:
                return current, False
            self._commit({**self._table, name: config})
        return config, True

    def add_all_if_absent(self, configs: Iterable[C]) -> builtins.list[str]:
        """`add_if_absent` for many configurations in one write of the file (the names added, in order): adding N
        one at a time writes the whole table N times."""
        with self._lock:
            added = {self.name_of(config): config for config in configs if self.name_of(config) not in self._table}
            if added:
                self._commit({**self._table, **added})
        return list(added)

    def _commit(self, table: dict[str, C]) -> None:
        """Write `table` under the next data version, publish both, then tell the change listeners. Caller holds
        the lock."""
        version = self._version.next()
        write_json(
            self.path,
            {self.table_key: {name: table[name].to_json() for name in sorted(table)}, "dataVersion": version.to_json()},
        )
        self._table = table
        self._version = version
        for listener in self._change_listeners:
            listener()
