"""The processes this process started that are no worker's orphans: its running workers, their sandboxes'
holders and a worker template it started (``watchdog.reap_orphans`` spares them). Nothing imported: the
grade command starts a template without importing torch, which the watchdog's modules import."""

RUNNING: set[int] = set()
