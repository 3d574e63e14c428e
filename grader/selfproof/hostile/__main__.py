"""``python -m grader.selfproof.hostile [--quick] [--gpu] [--warm] [--jobs N] [ATTACK ...]``: run the attack check."""

import argparse
import sys

from .check import main

parser = argparse.ArgumentParser(prog="python -m grader.selfproof.hostile", description=main.__doc__)
parser.add_argument("attacks", nargs="*", help="attack ids (default: all)")
parser.add_argument("--quick", action="store_true", help="only the attacks marked quick")
parser.add_argument("--gpu", action="store_true", help="only the attacks on GPU tests (exit 2 without CUDA)")
parser.add_argument("--warm", action="store_true",
                    help="grade as a batch grades: judges and workers forked from warm ones (default: cold, as one grading)")
parser.add_argument("--jobs", type=int, default=main.__kwdefaults__["jobs"], help="gradings at a time")
args = parser.parse_args()
sys.exit(main(quick=args.quick, attacks=args.attacks or None, jobs=args.jobs, gpu=args.gpu, warm=args.warm))
