"""json.schema: the DDL parser and the strict conversion of JSON bodies (no Spark needed)."""

import datetime as dt
import decimal
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_sink.errors import BadRecordError, SchemaError
from spark_sink.json_fields import converter, parse_ddl
from spark_sink.table_schema import TableLayout


def test_ddl_types() -> None:
    schema = parse_ddl(
        "device STRING, temp: DOUBLE, `odd name` ARRAY<INT>, m MAP<STRING, STRUCT<x: BIGINT, t TIMESTAMP>>, "
        "price DECIMAL(5,2), day DATE, ok boolean,"
    )
    assert schema.simpleString() == (
        "struct<device:string,temp:double,odd name:array<int>,m:map<string,struct<x:bigint,t:timestamp>>,"
        "price:decimal(5,2),day:date,ok:boolean>"
    )


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("", "no fields declared"),
        ("a STRING, a INT", "field 'a' is declared twice"),
        ("a VARIANT", "unknown or unsupported type 'VARIANT'"),
        ("a MAP<INT, STRING>", "use MAP<STRING, ...>"),
        ("a ARRAY<INT", "ends too early"),
        ("a INT b INT", "unexpected 'b'"),
        ("a DECIMAL(40,2)", "need 0 < p <= 38"),
    ],
)
def test_ddl_errors(ddl: str, message: str) -> None:
    with pytest.raises(SchemaError, match=r"^json\.schema") as raised:
        parse_ddl(ddl)
    assert message in str(raised.value)


def test_conversion_is_strict_and_names_the_field() -> None:
    convert = converter(parse_ddl("n INT, x DOUBLE, s STRING, t TIMESTAMP, d DATE, p DECIMAL(4,1), a ARRAY<SMALLINT>"))
    assert convert({"n": 3, "x": 2, "s": "v", "t": "2026-11-22T10:00:00+01:00", "d": "2026-11-22", "p": "1.25"}) == (
        3,
        2.0,
        "v",
        dt.datetime(2026, 11, 22, 9, 0, tzinfo=dt.UTC),
        dt.date(2026, 11, 22),
        decimal.Decimal("1.2"),
        None,
    )
    assert convert({"t": 0})[3] == dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    for document, message in [
        ([1], "body is an array, not a JSON object"),
        ({"n": "3"}, "field 'n': expected an integer"),
        ({"n": True}, "field 'n': expected an integer"),
        ({"n": 2**31}, "field 'n': expected an integer in [-2147483648, 2147483647]"),
        ({"x": "1.5"}, "field 'x': expected a number"),
        ({"s": 5}, "field 's': expected a string"),
        ({"t": "yesterday"}, "field 't': expected an ISO-8601 timestamp"),
        ({"p": 1000}, "field 'p': expected a decimal below 1000"),
        ({"a": [1, 40000]}, "field 'a[]': expected an integer"),
    ]:
        with pytest.raises(BadRecordError) as raised:
            convert(document)
        assert message in str(raised.value)


@given(
    st.dictionaries(st.sampled_from(["n", "s", "other"]), st.one_of(st.none(), st.integers(), st.text(), st.booleans()))
)
def test_conversion_matches_a_reference(document: dict[str, object]) -> None:
    convert = converter(parse_ddl("n BIGINT, s STRING"))
    n, s = document.get("n"), document.get("s")
    n_ok = n is None or (type(n) is int and -(2**63) <= n < 2**63)
    s_ok = s is None or isinstance(s, str)
    if n_ok and s_ok:
        assert convert(json.loads(json.dumps(document))) == (n, s)
    else:
        with pytest.raises(BadRecordError):
            convert(document)


def test_layout_checks_partition_columns_and_names() -> None:
    fields = parse_ddl("device STRING, reading DOUBLE")
    assert TableLayout.create(fields, ["device", "dt"]).table_schema().names[-2:] == ["device", "dt"]
    with pytest.raises(SchemaError, match="no column 'day'"):
        TableLayout.create(None, ["day"])
    with pytest.raises(SchemaError, match="'reading' is double"):
        TableLayout.create(fields, ["reading"])
    with pytest.raises(SchemaError, match="'body' is binary"):
        TableLayout.create(None, ["body"])
    with pytest.raises(SchemaError, match="clashes"):
        TableLayout.create(parse_ddl("topic STRING"), ["dt"])
