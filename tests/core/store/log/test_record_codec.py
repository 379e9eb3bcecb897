import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.store.errors import RecordFormatError
from core.store.log.record_codec import (
    BLANK_MAGIC,
    HEADER_SIZE,
    check_record,
    decode_keyed_fields,
    decode_record,
    encode_blank,
    encode_record,
    encode_tail,
    encode_topic,
    record_size_at,
)
from core.store.message import decode_properties, encode_host, encode_properties

topics = st.text(alphabet="abcXYZ019%|_-", min_size=1, max_size=127)
prop_text = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=30)
properties = st.dictionaries(prop_text.filter(bool), prop_text, max_size=6)
hosts = st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)).map(str)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(0, 2**62)


def canonical(host: str) -> str:
    """IPv4-mapped IPv6 addresses are stored like the IPv4 address they map (16-byte host field)."""
    address = ipaddress.ip_address(host)
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped or address)


def build(body=b"hello", topic="t", props=None, **fields):
    values = {
        "queue_id": 3,
        "flag": 7,
        "queue_offset": 11,
        "physical_offset": 0,
        "sys_flag": 0,
        "born_timestamp": 1_700_000_000_000,
        "born_host": "10.0.0.1",
        "born_port": 5555,
        "store_timestamp": 1_700_000_000_123,
        "store_host": "127.0.0.1",
        "store_port": 10911,
        "reconsume_times": 0,
        "prepared_transaction_offset": 0,
    }
    values.update(fields)
    from zlib import crc32

    return encode_record(
        body,
        crc32(body),
        encode_tail(encode_topic(topic.encode()), encode_properties(props or {})),
        values["queue_id"],
        values["flag"],
        values["queue_offset"],
        values["physical_offset"],
        values["sys_flag"],
        values["born_timestamp"],
        encode_host(values["born_host"]),
        values["born_port"],
        values["store_timestamp"],
        encode_host(values["store_host"]),
        values["store_port"],
        values["reconsume_times"],
        values["prepared_transaction_offset"],
    )


@settings(max_examples=300)
@given(
    body=st.binary(max_size=2000),
    topic=topics,
    props=properties,
    queue_id=int32,
    flag=int32,
    queue_offset=int64,
    physical_offset=int64,
    born_host=hosts,
    store_host=hosts,
    born_port=st.integers(0, 65535),
    stamp=int64,
    reconsume=st.integers(0, 1000),
    prep=int64,
)
def test_encode_decode_round_trip(
    body,
    topic,
    props,
    queue_id,
    flag,
    queue_offset,
    physical_offset,
    born_host,
    store_host,
    born_port,
    stamp,
    reconsume,
    prep,
):
    record = build(
        body,
        topic,
        props,
        queue_id=queue_id,
        flag=flag,
        queue_offset=queue_offset,
        physical_offset=physical_offset,
        born_host=born_host,
        store_host=store_host,
        born_port=born_port,
        store_timestamp=stamp,
        reconsume_times=reconsume,
        prepared_transaction_offset=prep,
    )
    padded = b"\xaa" * 5 + record + b"\x00" * 9
    message = decode_record(padded, 5, len(padded))
    assert message.body == body
    assert message.topic == topic
    assert message.properties == props
    assert (message.queue_id, message.flag, message.queue_offset) == (queue_id, flag, queue_offset)
    assert message.commit_log_offset == physical_offset
    assert message.store_size == len(record)
    assert message.born_host == (canonical(born_host), born_port)
    assert message.store_host[0] == canonical(store_host)
    assert message.store_timestamp == stamp
    assert (message.reconsume_times, message.prepared_transaction_offset) == (reconsume, prep)


@settings(max_examples=200)
@given(body=st.binary(min_size=1, max_size=300), data=st.data())
def test_every_single_byte_flip_is_detected(body, data):
    record = bytearray(build(body, "topic", {"TAGS": "a", "KEYS": "k1 k2"}))
    position = data.draw(st.integers(0, len(record) - 1))
    delta = data.draw(st.integers(1, 255))
    record[position] ^= delta
    with pytest.raises(RecordFormatError):
        check_record(bytes(record), 0, len(record))


def test_without_crcs_a_flipped_body_byte_passes_but_broken_structure_does_not():
    """check_crcs=False is for the write ring's bytes, which never left the process: the CRCs are skipped, the
    record's structure is still checked."""
    record = bytearray(build(b"x" * 40, "topic", {"TAGS": "a"}))
    record[HEADER_SIZE + 5] ^= 0xFF  # a body byte
    with pytest.raises(RecordFormatError, match="body CRC"):
        decode_record(bytes(record), 0, len(record))
    assert decode_record(bytes(record), 0, len(record), False).body[5] == ord("x") ^ 0xFF
    record[4] ^= 0x01  # the magic
    with pytest.raises(RecordFormatError, match="bad magic"):
        decode_record(bytes(record), 0, len(record), False)
    short = build(b"y" * 10)
    with pytest.raises(RecordFormatError, match=r"out of range|too few"):
        decode_record(short[:-1], 0, len(short) - 1, False)


def test_truncated_record_is_refused():
    record = build(b"x" * 100)
    with pytest.raises(RecordFormatError, match=r"out of range|too few"):
        check_record(record[:-1], 0, len(record) - 1)


def test_blank_filler():
    blank = encode_blank(4096)
    assert record_size_at(blank, 0) == (4096, BLANK_MAGIC)
    with pytest.raises(RecordFormatError, match="bad magic"):
        check_record(blank + bytes(200), 0, 208)


def test_header_is_116_bytes_and_layout_is_big_endian():
    record = build(b"", "t", {}, queue_id=1)
    assert len(record) == HEADER_SIZE + 2 + 1 + 2
    assert record[:4] == len(record).to_bytes(4, "big")
    assert record[16:20] == (1).to_bytes(4, "big")


@given(properties)
def test_properties_round_trip(props):
    assert decode_properties(encode_properties(props)) == props


any_text = st.text(st.sampled_from("ab\x01\x02é"), max_size=4)


@given(st.dictionaries(any_text, any_text, max_size=4))
@settings(max_examples=500)
def test_properties_refuse_exactly_what_cannot_round_trip(props):
    """The fast check (counting separators) agrees with a plain reference: refused iff a name is empty or a name
    or value holds a separator; everything else round-trips."""
    from core.store.errors import InvalidMessageError

    bad = any(
        not name or any(sep in text for text in (name, value) for sep in "\x01\x02") for name, value in props.items()
    )
    if bad:
        with pytest.raises(InvalidMessageError):
            encode_properties(props)
    else:
        assert decode_properties(encode_properties(props)) == props


def test_properties_refuse_what_is_not_a_string():
    from core.store.errors import InvalidMessageError

    for props in ({"a": 1}, {2: "b"}, {"a": "b", "c": None}):
        with pytest.raises(InvalidMessageError, match="must be strings"):
            encode_properties(props)  # type: ignore[arg-type]


def test_properties_refuse_separators():
    from core.store.errors import InvalidMessageError

    with pytest.raises(InvalidMessageError, match="reserved as separators"):
        encode_properties({"a": "x\x01y"})
    with pytest.raises(InvalidMessageError, match="at most 65535"):
        encode_properties({"big": "v" * 70000})


def plain_decode_properties(data: bytes) -> dict[str, str]:
    """The reference: item by item, empty items skipped, an item without its separator refused."""
    properties = {}
    for item in data.decode().split("\x02"):
        if item:
            name, sep, value = item.partition("\x01")
            if not sep:
                raise ValueError(f"property item {item[:40]!r} has no name/value separator")
            properties[name] = value
    return properties


@given(st.text(alphabet="ab\x01\x02é", max_size=30))
def test_decode_properties_reads_any_blob_as_the_plain_loop_does(text):
    data = text.encode()
    outcomes = []
    for decode in (decode_properties, plain_decode_properties):
        try:
            outcomes.append(("ok", decode(data)))
        except ValueError as exc:
            outcomes.append(("error", str(exc)))
    assert outcomes[0] == outcomes[1]


def test_more_topics_and_hosts_than_the_decoder_keeps_each_decode_as_their_own():
    # The decoder keeps the names and (host, port) pairs it decoded, by their bytes, up to NAMES_KEPT of each, and
    # starts again when full: every record still reads back its own topic, hosts and ports, whichever were kept.
    from core.store.log.record_codec import NAMES_KEPT

    count = NAMES_KEPT + 50
    for n in [*range(count), *range(0, count, 97)]:
        host = f"10.{n // 65536}.{n // 256 % 256}.{n % 256}"
        record = build(topic=f"topic-{n}", born_host=host, store_host=host, born_port=n % 7, store_port=n % 5)
        message = decode_record(*_whole(record))
        assert message.topic == f"topic-{n}"
        assert message.born_host == (host, n % 7) and message.store_host == (host, n % 5)


def test_a_topic_that_is_not_ascii_is_a_format_error_not_a_name():
    record = bytearray(build(topic="ab"))
    at = record.index(b"\x00\x02ab") + 2
    record[at] = 0xC3  # the bytes of "é" in place of "ab", CRC fixed below: only the topic is wrong
    record[at + 1] = 0xA9
    with pytest.raises(RecordFormatError, match="undecodable topic"):
        decode_record(*_whole(_with_record_crc(record)))


def _whole(record: bytes) -> tuple[bytes, int, int]:
    return record, 0, len(record)


def _with_record_crc(record: bytearray) -> bytes:
    from zlib import crc32

    body_length = int.from_bytes(record[112:116], "big")
    record[8:12] = crc32(record[HEADER_SIZE + body_length :], crc32(record[12:HEADER_SIZE])).to_bytes(4, "big")
    return bytes(record)


@settings(max_examples=200)
@given(
    body=st.binary(max_size=300),
    topic=topics,
    props=properties,
    keys=st.one_of(st.none(), prop_text),
    unique_id=st.one_of(st.none(), prop_text),
    stamp=int64,
)
def test_the_keyed_fields_are_what_the_whole_decode_gives(body, topic, props, keys, unique_id, stamp):
    # What the index process reads of a record (its size, store time, topic, KEYS and UNIQ_KEY), against the full
    # decoder as the reference.
    props = dict(props)
    if keys is not None:
        props["KEYS"] = keys
    if unique_id is not None:
        props["UNIQ_KEY"] = unique_id
    record = build(body, topic, props, store_timestamp=stamp)
    whole = decode_record(record, 0, len(record))
    view = memoryview(b"\0" * 7 + record + b"\0" * 9)
    assert decode_keyed_fields(view, 7, 7 + len(record)) == (
        whole.store_size,
        whole.store_timestamp,
        whole.topic,
        whole.properties.get("KEYS"),
        whole.properties.get("UNIQ_KEY"),
    )


@settings(max_examples=200)
@given(body=st.binary(min_size=1, max_size=300), data=st.data())
def test_the_keyed_fields_refuse_every_changed_byte_but_the_bodys(body, data):
    # The body is not the index's to read: its CRC is left to the body's readers. Every other byte is covered.
    record = bytearray(build(body, "topic", {"TAGS": "a", "KEYS": "k1 k2", "UNIQ_KEY": "u"}))
    position = data.draw(st.integers(0, len(record) - 1))
    record[position] ^= data.draw(st.integers(1, 255))
    if HEADER_SIZE <= position < HEADER_SIZE + len(body):
        assert decode_keyed_fields(bytes(record), 0, len(record))[3] == "k1 k2"
    else:
        with pytest.raises(RecordFormatError):
            decode_keyed_fields(bytes(record), 0, len(record))


@given(
    st.lists(
        st.one_of(st.sampled_from(["KEYS", "UNIQ_KEY", "KEY", "UNIQ_KEYS", "XKEYS"]), st.text(alphabet="ab\x01\x02é")),
        max_size=8,
    ).map(lambda parts: "".join(parts))
)
def test_index_keys_read_any_blob_as_the_plain_loop_does(text):
    # KEYS and UNIQ_KEY, read alone (what the index process reads), as the plain loop's dictionary has them (the
    # last of a name wins), and the same refusals.
    from core.store.log.property_codec import decode_properties_text

    def index_keys(blob):
        properties = decode_properties_text(blob, frozenset(("KEYS", "UNIQ_KEY")))
        return properties.get("KEYS"), properties.get("UNIQ_KEY")

    def plain(blob):
        properties = plain_decode_properties(blob.encode())
        return properties.get("KEYS"), properties.get("UNIQ_KEY")

    outcomes = []
    for read in (index_keys, plain):
        try:
            outcomes.append(("ok", read(text)))
        except ValueError as exc:
            outcomes.append(("error", str(exc)))
    assert outcomes[0] == outcomes[1]
