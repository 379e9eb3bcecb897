"""mqgate's configuration: defaults, then a TOML or YAML file, then flags, into frozen settings per part.

settings.py    Settings and load_settings: the sections, their merge, errors with file:line ("did you mean")
config_file.py reading a TOML or YAML file with the line of each key; ConfigError
values.py      the parsers of values (sizes, ports, booleans, log levels)
help.py        each key's meaning, shown by `mqgate config` and the reference
reference.py   `mqgate config --reference`: every key, as docs/configuration.md holds it
"""
