"""dsh-daemon: an editor agent daemon speaking LSP-framed JSON-RPC over stdio."""

__version__ = "0.1.0"
