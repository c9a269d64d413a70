"""The agent's wire protocol, used by both ends: the controller (connections/agent.py) and
the agent on the target (server.py, wire.py). Standard library only, and cheap to import.

The agent writes MAGIC, then frames: 1 kind byte + 4-byte big-endian length + body.
  J  a JSON object: the hello (agent -> controller), a request, or a reply
  A  (empty) the agent has read a request: from here on it may run
  K  a reply after which the worker that made it serves the next request (server.py)
  D  a chunk of a request's payload (controller -> agent), E  the end of that payload
The hello carries PROTOCOL and the agent's version: the digest of its package's sources
(package_digest_input), which the controller computes the same way over the artifact it
ships. An agent of another version is never spoken to: the controller ships its own.
"""

MAGIC = b"\0opsrunner-agent\0"
PROTOCOL = 2
#: Written by the start script when the target's cache has no copy of this version.
NEED_SOURCE = b"\0opsrunner-agent-needs-source\0"
#: The package's name on the target (importable without the controller's `opsrunner`).
PACKAGE = "opsrunner_agent"

HEAD_SIZE = 5
MAX_JSON = 64 << 20  # bounded reads: a larger frame is a protocol error, never buffered
MAX_DATA = 1 << 20
#: The controller's payload chunks (D frames) are at most this big.
CHUNK = MAX_DATA

JSON, ACK, KEEP, DATA, END = b"J", b"A", b"K", b"D", b"E"


def frame(kind: bytes, body: bytes) -> bytes:
    return kind + len(body).to_bytes(4, "big") + body


def frame_size(head: bytes) -> int:
    """The body's length announced by a frame's 5-byte head."""
    return int.from_bytes(head[1:5], "big")


def package_digest_input(sources: "dict[str, bytes]") -> bytes:
    """What the agent's version digests: each module's file name and bytes, sorted by name."""
    return b"".join(name.encode("utf-8") + b"\0" + sources[name] + b"\0" for name in sorted(sources))
