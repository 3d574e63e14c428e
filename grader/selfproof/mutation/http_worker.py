"""``python -m grader.selfproof.mutation.http_worker PORT``: cosmic-ray's HTTP worker, listening on loopback only.

The engine's own ``cosmic-ray http-worker --port`` listens on every interface and runs the
test command each request names; ``grader mutate --jobs N`` needs workers on this machine
only, so this serves the same handler on 127.0.0.1. On several machines, run the engine's
worker there instead (see README).
"""

from __future__ import annotations

import sys

from aiohttp import web
from cosmic_ray.distribution.http import handle_mutate_and_test


def main(port: int) -> None:
    app = web.Application()
    app.add_routes([web.post("/", handle_mutate_and_test)])
    web.run_app(app, host="127.0.0.1", port=port, print=None)


if __name__ == "__main__":
    main(int(sys.argv[1]))
