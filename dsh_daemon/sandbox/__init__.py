"""The sandbox: confined commands and the egress proxy they reach the network through."""
