"""Judge-side containment: what the kernel enforces around a worker, set up from outside it.

- ``worker``: the ``Worker`` backend (start and request loop), the one entry point;
- ``launch``: staging and starting a worker process with its ``WorkerConfig``;
- ``limits``: its limits, the paths hidden from it, its interpreter and environment;
- ``channel``: the judge's end of its pipes (``wire`` frames within deadlines); ``output``: what it prints;
- ``watchdog``: the memory watch where no cgroup caps it, and killing its whole tree;
- ``tree``: what its process tree holds and has used, read from outside it;
- ``cgroup``: a per-worker memory cgroup (v2, or v1's memory and pids controllers) whose
  limit counts shared memory and tmpfs files, with a process limit and a kill of the tree;
- ``uids``: a dedicated uid per concurrent worker, claimed with a lock held for its life;
- ``syscalls``: the seccomp deny-list, generated with libseccomp and exported as BPF;
- ``bubblewrap``: the ``bwrap`` command line that confines a worker;
- ``level``: what this host gives, named for the ``isolation`` record and ``selfcheck``.

Nothing here runs inside the sandbox (that is ``grader/confined``); nothing here trusts the worker.
"""
