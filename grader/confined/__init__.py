"""What runs inside the sandbox, and nothing else: the worker's entry point and confinement.

Every file of this folder (and ``grader/wire.py``, the one module both sides share) is copied
into the worker's private folder and runs beside the submission, so nothing here is trusted:
the submission can rewrite any of it. The judge side never imports from this folder (the
``--in-process`` debugging backend is the one documented exception).
"""
