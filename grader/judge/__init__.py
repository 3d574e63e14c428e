"""The judge: what runs hidden tests against a submission, and its in-process debugging backend."""
