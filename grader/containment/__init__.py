"""Judge-side containment: what the kernel enforces around a worker, set up from outside it.

- ``cgroup``: a per-worker memory cgroup (v2, or v1's memory and pids controllers) whose
  limit counts shared memory and tmpfs files, with a process limit and a kill of the tree;
- ``uids``: a dedicated uid per concurrent worker, claimed with a lock held for its life;
- ``syscalls``: the seccomp deny-list, generated with libseccomp and exported as BPF;
- ``bubblewrap``: the ``bwrap`` command line that confines a worker;
- ``level``: what this host gives, named for the ``isolation`` record and ``selfcheck``.

Nothing here runs inside the sandbox (that is ``grader/confined``); nothing here trusts the worker.
"""
