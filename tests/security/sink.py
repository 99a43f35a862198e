"""A local HTTP server that records every request: where hostile files point their URLs."""

from __future__ import annotations

import http.server
import threading
from typing import Any


class Sink:
    """A local HTTP server that records every request; hostile files point their URLs here."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        sink = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                sink.requests.append(self.path)
                self.send_response(404)
                self.end_headers()

            do_HEAD = do_POST = do_GET

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"
