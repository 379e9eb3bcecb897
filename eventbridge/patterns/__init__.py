"""Event patterns (AWS EventBridge semantics), compiled once, matched at a cost that follows the event, not the
number of rules (after aws/event-ruler's machine).

    compiler.py    a pattern validated and compiled into conditions on field paths
    operators.py   the matchers a leaf may hold (prefix, suffix, anything-but, numeric, cidr, wildcard, ...), one
                   small frozen type each
    matcher.py     many compiled patterns indexed together: `Matcher.match(event)` -> the rules it matches
    field_trie.py, leaf_index.py, numeric_index.py   the matcher's indexes: field paths, leaf values, ranges
    errors.py      PatternError, with the path of the bad part
"""
