"""The commands of ``depthbench``: each module has ``add_parser(subparsers)``, ``main(args)`` (unpacks the
parsed arguments) and a typed ``run(...)``, the same function :mod:`harness.api` exposes. Top-level imports stay
light (argparse, errors): ``depthbench --help`` imports no torch."""
