"""Drivers of the hidden suites: the loops, inputs, oracles and checks the judge runs.

Everything here runs in the judge; nothing is ever copied into the worker. One convention says
what a function does to the worker and what it does in the judge:

- A *side* is where objects are built and driven (``sides.Side``): the submission (a
  ``handle.Submission``: ``sub.lib(target, ...)`` builds a library object in the worker and
  returns a ``Remote``) or the judge (``sides.JUDGE``: ``JUDGE.lib(target, ...)`` builds the same
  object here and returns a ``Local``, which has the Remote's ``call``/``get``/``set``/``read``).
  A recipe both sides follow is written once, with the side as its first parameter
  (``strides.pairs(side)``, ``amp.sequential(side, recipe)``, ``checkpoint.build_run(side)``), so
  both get identical inputs and call sequences; where the judge needs the object itself, it takes
  the Local's ``.obj`` (or ``sides.unwrap`` of a whole result).
- A driver that needs more of a side than building objects (P5: setting ``.grad``, handing over a
  closure) defines one pair of side classes with the same methods, ``WorkerSide(sub)`` and ``JudgeSide()``
  (``optim.py``), and its run code takes either.
- A function that acts only on the worker takes ``sub`` first (calling the submission's own
  functions, measuring it from outside); a function that only computes in the judge (an oracle, a
  check) takes no side. Oracles too large to sit beside their driver live in ``<driver>_oracle.py``.
- Files cross only through ``folder.Folder``; answers are compared only with ``answers.py``.
"""
