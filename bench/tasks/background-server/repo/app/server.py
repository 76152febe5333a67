"""The dev server: `python -m app.server [--port N]` (default 8765; 0 picks a free port).

GET /items?limit=N&offset=M  -> {"items": [...], "total": 20}
GET /health                   -> {"ok": true}
"""

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from app.catalog import ITEMS, page


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        url = urlparse(self.path)
        query = parse_qs(url.query)
        if url.path == "/health":
            self.reply(200, {"ok": True})
        elif url.path == "/items":
            limit = int(query.get("limit", ["10"])[0])
            offset = int(query.get("offset", ["0"])[0])
            self.reply(200, {"items": page(limit, offset), "total": len(ITEMS)})
        else:
            self.reply(404, {"error": f"no route {url.path}"})

    def reply(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
