"""The judge: the trusted process that runs the hidden suites against one submission and decides every verdict.

- ``plugin``: the pytest plugin (``pytest -p grader.judge.plugin``): the ``sub`` fixture, points, the judge's record;
- ``session``: a judge session's process; ``zygote``: the judge zygote, which imports once and forks sessions;
- ``handle``: ``Submission`` and ``Remote``, the judge's handle on the worker (calls, objects, readings from outside);
- ``budget``: how a session shares its time budget among its problems;
- ``drivers/``: the loops, inputs, oracles and checks the hidden suites drive student code with, by handle;
- ``hidden/``: the hidden suites, one per problem;
- ``diagnosis/``: which known mistake a failing submission behaves like (``schedule``: when it runs, within what time);
- ``inprocess``: the ``--in-process`` debugging backend (the dispatcher in the judge's own process).
"""
