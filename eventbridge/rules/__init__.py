"""Rule files: the YAML that operators write (`DATA_DIR/rules/*.yaml`, or made through the HTTP API), read with the
position of every node so that each error names file:line:column, validated, and loaded per directory.

    rule_file.py      one file: its rules, sources, schemas and archives (the entry point)
    node_reader.py    reading a YAML node tree as configuration, errors at their nodes ("did you mean ...?")
    pattern_field.py, target_file.py, source_file.py, archive_file.py   each part of a file, read and checked
    model.py          the rule model those produce: Rule, its targets, sources, schemas, archives
    directory.py      a directory of files into one RuleSet; a refused file keeps nothing half-loaded
    api_definitions.py   what the HTTP API creates, kept as rule files of their own
"""
