"""``substrait-opt convert``: read a plan in any encoding and write it as json, binpb or text."""

from __future__ import annotations

import argparse


def cmd_convert(args: argparse.Namespace) -> int:
    from optimizer.plan_io import check_output, load_plan, save_plan
    from optimizer.schema import raise_for_problems

    check_output(args.output)
    plan = load_plan(args.input)
    raise_for_problems(plan)
    save_plan(plan, args.output, format=args.format)
    return 0


def register(sub, name: str, help_text: str) -> None:
    p = sub.add_parser(name, help=help_text,
                       description="Read a plan (JSON or binary protobuf; older encodings upgraded losslessly) "
                                   "and write it as json, binpb or text.")
    p.add_argument("input", help="plan file, or '-' for stdin")
    p.add_argument("-o", "--output", default="-", help="output file, '-' for stdout (default)")
    p.add_argument("--format", choices=["json", "binpb", "text"], default=None,
                   help="output format (default: from the file name; json on stdout)")
    p.set_defaults(func=cmd_convert)
