#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (from the unpacked
# bundle in /autograder/source): a virtual environment, torch, then the kit from the bundled
# source. Every setting comes from config.sh and can be overridden by the environment.
set -euo pipefail

SOURCE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=/dev/null
. "$SOURCE/config.sh"
VENV="${KIT_VENV:-${AUTOGRADER_ROOT:-/autograder}/venv}"

# The grader needs Python 3.10 or newer (Gradescope's Ubuntu 22.04 image has 3.10; 20.04 has 3.8).
if command -v python3 >/dev/null && ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "setup.sh: the grader needs Python 3.10 or newer, this image has $(python3 -V 2>&1):" \
         "choose the Ubuntu 22.04 (or newer) base image in the autograder settings, or install a newer" \
         "python3 in this script before the virtual environment is made" >&2
    exit 1
fi
if ! command -v python3 >/dev/null || ! python3 -c "import ensurepip, venv" 2>/dev/null; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv python3-pip
fi
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
if [ -n "$KIT_TORCH_INDEX" ]; then
    # PyTorch's index is asked for torch alone (its dependencies come from PyPI with the kit, below), and
    # retried once: where it cannot be reached, the build stops within a minute and says what to do.
    if ! "$VENV/bin/python" -m pip install --quiet "$KIT_TORCH" --index-url "$KIT_TORCH_INDEX" --no-deps \
            --retries 1 --timeout 30; then
        echo "setup.sh: could not install $KIT_TORCH from $KIT_TORCH_INDEX; where that index cannot be" \
             "reached, set KIT_TORCH_INDEX= (empty) for PyPI's build, in the environment or with" \
             "grader gradescope-bundle --torch-index-url ''" >&2
        exit 1
    fi
else
    "$VENV/bin/python" -m pip install --quiet "$KIT_TORCH"
fi
# Editable, so that the judge runs the bundled source itself (hidden suites and all).
"$VENV/bin/python" -m pip install --quiet -e "$SOURCE/kit[grader]"
"$VENV/bin/python" -c "import torch, grader; print('kit', grader.__version__, 'torch', torch.__version__)"

# Only root (the judge) may read the hidden suites; student code runs as a dropped uid.
chmod -R go-rwx "$SOURCE/kit"
