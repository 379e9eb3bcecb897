"""RocketMQ 4's remoting protocol: what RocketMQ 4 clients (Java's DefaultMQProducer, the C++ client, ali-ons,
mqadmin) speak to NameServers and brokers. A wire protocol beside the core, as proxy/ is for RocketMQ 5's gRPC.

- command.py: a `RemotingCommand` (code, language, version, opaque, flag, remark, extFields, body): one request or
  reply, with the flag bits (response, oneway) and the reply that answers a request.
- header_codec.py: the header in its two serialize types, JSON (what mqgate answers in, as the Java server does by
  default) and RocketMQ's binary layout, both read; extFields values clients send as JSON numbers or booleans are
  taken as the strings Java would hold.
- frame.py: the frame, without I/O (as h11): `FrameReader` takes bytes and gives commands, `encode_frame` gives a
  command's bytes; a frame over MAX_FRAME_BYTES or with a header longer than itself is refused with what was wrong.
- codes.py: the request and response codes served, with RocketMQ's names and numbers.
- request_headers.py: the custom headers of the requests a broker serves (send, pull), read from extFields with
  RocketMQ's required fields and defaults, and its reply headers as strings.
- acl_signature.py: RocketMQ's plain ACL signature (HmacSHA1 of the sorted extField values and the body), made and
  checked.
- message_codec.py: messages as the protocol carries them: stored records (a pull reply's body), producer batches,
  the `name\x01value\x02` properties text, the offset message id.
- channel.py: one connection, either end: replies matched to requests by opaque, each request served in a task of
  its own (a long-polled pull holds up nothing else), requests sent both ways (a broker asks its clients too).
- server.py: a listener of channels and the handler of each request code (RocketMQ's processor table); unknown
  codes answered REQUEST_CODE_NOT_SUPPORTED. client.py: a channel per address, for what speaks to NameServers and
  brokers.

A request's bytes go: socket -> Channel (channel.py) -> FrameReader (frame.py, header_codec.py) -> RemotingCommand
-> RemotingServer's handler of its code (server.py) -> a reply RemotingCommand -> encode_frame -> socket.
"""
