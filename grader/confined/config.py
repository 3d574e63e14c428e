"""What the judge tells ``confine.py`` about the worker it confines (standard library only).

Built by the judge (``grader.containment.launch``), passed as one JSON argument on the worker's
command line, read back by ``confine.py`` before any student code runs.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields


@dataclass(frozen=True)
class Withheld:
    """Library code one worker runs without (P5's: torch's optimizers), chosen by the judge.

    ``covers``: files of the interpreter's tree -> the text bound read-only over them where the worker
    has its own root (all the worker can read of them there); ``kernels``: prefixes of aten
    operator names (``aten::_foreach_``) whose kernels raise ``rule`` in the worker, registered before
    the submission is imported."""

    covers: dict[str, str]
    kernels: tuple[str, ...]
    rule: str


@dataclass(frozen=True)
class WorkerConfig:
    workdir: str  # the working copy as the worker's first process sees it (staging folder, or bubblewrap's bind)
    root: str  # an empty folder where the hand-written root is mounted
    masks: list[str]  # paths covered wherever they are visible (the kit, the reference, the pristine package)
    readonly: list[str]  # extra paths bound read-only
    expose: list[str]  # the interpreter's folders, bound read-only
    uid: int | None  # the dedicated uid to drop to (as root), else None
    gid: int | None
    request_fd: int  # the pipe requests come on
    response_fd: int  # the pipe answers go back on
    placement_fd: int | None  # the socket to ask the judge for placement in the cgroup (None: no cgroup)
    file_bytes: int
    disk_bytes: int  # the private /tmp and /dev/shm
    processes: int
    namespaces: bool  # whether to try namespaces at all
    reachable: bool  # whether other users can read the interpreter (else the uid is not dropped)
    bubblewrap: bool  # started inside bubblewrap, which built the namespaces and the root
    syscall_filter: str | None  # the seccomp program the worker loads, relative to the working folder (None: none)
    syscalls: str  # what the syscall filter does, for the isolation record
    syscall_numbers: dict[str, int]  # numbers of the calls the C library does not wrap, on this architecture
    covers: dict[str, str] = field(default_factory=dict)  # Withheld.covers, staged: path -> the file bound over it
    withheld_kernels: list[str] = field(default_factory=list)  # Withheld.kernels
    withheld_rule: str = ""  # Withheld.rule
    code_by_name: bool = True  # Limits.code_by_name

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerConfig:
        data = json.loads(text)
        names = {field.name for field in fields(cls)}
        if type(data) is not dict or set(data) != names:
            raise ValueError(f"a worker configuration has exactly the keys {sorted(names)}")
        return cls(**data)
