"""The network an attack must not reach: listeners on the host's loopback and an abstract socket."""

from __future__ import annotations

import socket


class Listener:
    """A TCP and a UDP socket on the loopback (IPv4 and IPv6) and an abstract unix socket."""

    def __init__(self, marker: str) -> None:
        self.sockets: list[tuple[str, socket.socket]] = []
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.bind(("127.0.0.1", 0))
        self.port = tcp.getsockname()[1]
        self._add("tcp", tcp)
        for family, host, kind, name in ((socket.AF_INET, "127.0.0.1", socket.SOCK_DGRAM, "udp"),
                                         (socket.AF_INET6, "::1", socket.SOCK_STREAM, "tcp6"),
                                         (socket.AF_INET6, "::1", socket.SOCK_DGRAM, "udp6")):
            try:
                sock = socket.socket(family, kind)
                sock.bind((host, self.port))
                self._add(name, sock)
            except OSError:
                pass
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.bind("\0" + marker)
        self._add("unix", unix)

    def _add(self, name: str, sock: socket.socket) -> None:
        if sock.type == socket.SOCK_STREAM:
            sock.listen(8)
        sock.setblocking(False)
        self.sockets.append((name, sock))

    def contacted(self) -> list[str]:
        found = []
        for name, sock in self.sockets:
            try:
                if sock.type == socket.SOCK_STREAM:
                    sock.accept()[0].close()
                else:
                    sock.recv(64)
                found.append(name)
            except (BlockingIOError, OSError):
                pass
        return found

    def close(self) -> None:
        for _, sock in self.sockets:
            sock.close()
