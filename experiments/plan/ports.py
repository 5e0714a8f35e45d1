"""Whether a TCP port can be taken, asked before a server is started, so a taken port is one line, not a traceback
from inside the server after it has already said where it listens."""
from __future__ import annotations

import socket


def _socket_for(host: str) -> socket.socket:
    return socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)


def port_is_free(host: str, port: int) -> bool:
    """Whether `host:port` can be bound now (the test a server makes itself before it fails with a traceback).
    SO_REUSEADDR as servers set it: a port left in TIME_WAIT counts as free, a listening one does not."""
    with _socket_for(host) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def pick_free_port(host: str) -> int:
    """A port on `host` that is free now (the kernel's choice for port 0), for a server that needs a number."""
    with _socket_for(host) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])
