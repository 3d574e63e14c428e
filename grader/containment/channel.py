"""The judge's end of a worker's two pipes: whole frames (``wire``), each within a deadline."""

from __future__ import annotations

import os
import select
import time

from .. import wire


class Broken(Exception):
    """No frame crossed: a deadline passed, the worker closed its end (``ended``) or broke the protocol."""

    def __init__(self, message: str, ended: bool = False) -> None:
        super().__init__(message)
        self.ended = ended


class _Requests:
    """The request pipe (non-blocking) as a stream for ``wire.write_frame``, bound to a deadline."""

    def __init__(self, fd: int, deadline: float, what: str) -> None:
        self.fd, self.deadline, self.what = fd, deadline, what

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([], [self.fd], [], left)[1]:
                raise Broken(f"the worker stopped reading requests while {self.what}; it was stopped")
            try:
                view = view[os.write(self.fd, view[: 1 << 16]):]
            except BlockingIOError:
                continue
            except BrokenPipeError:
                raise Broken(f"the worker process died while {self.what}") from None

    def flush(self) -> None:
        pass


class _Answers:
    """The answer pipe as a stream for ``wire.read_frame``, bound to a deadline."""

    def __init__(self, fd: int, deadline: float, what: str) -> None:
        self.fd, self.deadline, self.what = fd, deadline, what

    def read(self, size: int) -> bytes:
        left = self.deadline - time.monotonic()
        if left <= 0 or not select.select([self.fd], [], [], left)[0]:
            raise Broken(f"no answer within the time limit while {self.what}; the worker was stopped")
        return os.read(self.fd, min(size, 1 << 20))


class Channel:
    def __init__(self, request_w: int, response_r: int) -> None:
        self.request_w, self.response_r = request_w, response_r

    def send(self, message: dict, deadline: float, what: str) -> None:
        wire.write_frame(_Requests(self.request_w, deadline, what), message)

    def receive(self, deadline: float, what: str) -> dict:
        try:
            frame = wire.read_frame(_Answers(self.response_r, deadline, what))
        except wire.WireError as exc:
            raise Broken(f"the worker broke the protocol while {what} ({exc})") from None
        if frame is None:  # it died, or closed its answer channel (then it is killed)
            raise Broken(f"the worker process died while {what}", ended=True)
        return frame

    def pending(self) -> bool:
        """Whether the worker has spoken (or closed its end) since its last answer."""
        return bool(select.select([self.response_r], [], [], 0)[0])

    def close(self) -> None:
        for fd in (self.request_w, self.response_r):
            try:
                os.close(fd)
            except OSError:
                pass
