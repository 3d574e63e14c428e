"""Judge-side drivers of stateful problems: the loops, inputs and oracles of the hidden suites.

A driver runs in the judge. It drives the submission's objects in the worker through handles
(``session.Remote``) and, where PyTorch has the answer, the very same code drives PyTorch's
objects in the judge through ``local.Local``, a wrapper with the Remote's methods, so both sides get
identical inputs and call sequences. Nothing here is ever copied into the worker.
"""
