"""What a worker prints: drained, the first bytes kept, the rest counted (never read as answers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import BinaryIO


@dataclass
class Output:
    """The worker's stdout and stderr: the first ``limit`` bytes kept, the rest counted."""

    limit: int
    kept: bytearray = field(default_factory=bytearray)
    total: int = 0

    def drain(self, stream: BinaryIO) -> None:
        for chunk in iter(lambda: stream.read1(65536), b""):
            self.total += len(chunk)
            room = self.limit - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]

    def tail(self, size: int = 600) -> str:
        text = self.kept.decode(errors="replace")[-size:]
        return text + (f" [{self.total - len(self.kept)} more bytes dropped]" if self.total > len(self.kept) else "")
