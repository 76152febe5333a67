"""Runs llama-cpp-python's OpenAI-compatible server on a listening socket it inherits (`--fd N`).

The test binds 127.0.0.1:0 itself and passes the socket down, so no other process on the machine can
take the port between choosing it and serving on it (a probe-then-bind port is a race)."""

from __future__ import annotations

import argparse
import socket

import uvicorn
from llama_cpp.server.app import create_app
from llama_cpp.server.settings import ModelSettings, ServerSettings


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--alias", required=True)
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--n-threads", type=int, default=2)
    args = parser.parse_args()
    listener = socket.socket(fileno=args.fd)  # family and type are read from the descriptor
    app = create_app(
        server_settings=ServerSettings(),
        model_settings=[
            ModelSettings(
                model=args.model, model_alias=args.alias, n_ctx=args.n_ctx, n_threads=args.n_threads
            )
        ],
    )
    uvicorn.Server(uvicorn.Config(app, log_level="info")).run(sockets=[listener])


if __name__ == "__main__":
    main()
