"""A tiny HTTP receiver for trying EventBridge's HTTP targets: prints every request it gets and answers 204.

    python3 examples/http_receiver.py [--port 9000] [--host 127.0.0.1]

Each request is printed as its method and path with its CloudEvents type and subject (the `ce-type` and
`ce-subject` headers of the binary mode), then its body. The standard library only: it runs with any Python 3.
"""

from __future__ import annotations

import argparse
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# CloudEvents attributes printed with each request (binary mode: ce-* headers).
SHOWN_ATTRIBUTES = ("type", "subject")


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        # The attributes a reader looks at first; every ce-* header is in self.headers.
        shown = [f"{name}={self.headers[f'ce-{name}']}" for name in SHOWN_ATTRIBUTES if f"ce-{name}" in self.headers]
        print(" ".join([self.command, self.path, *shown]), flush=True)
        print(body.decode("utf-8", errors="replace"), flush=True)
        self.send_response(204)
        self.end_headers()

    do_PUT = do_POST

    def log_message(self, format: str, *args: object) -> None:  # the requests are printed above, not logged twice
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), Receiver)
    print(f"listening on http://{args.host}:{args.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
