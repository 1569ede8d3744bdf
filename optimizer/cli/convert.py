"""``substrait-opt convert``: read a plan in any encoding and write it as json, binpb or text."""

from __future__ import annotations

import argparse

from optimizer.cli.args import add_plan_command


def cmd_convert(args: argparse.Namespace) -> int:
    from optimizer.cli.args import output_format
    from optimizer.load.pipeline import load
    from optimizer.plan_io import check_output, save_plan

    check_output(args.output)
    fmt = output_format(args.output, args.format)  # the name and --format agree; no binary to a terminal
    loaded = load(args.input)
    loaded.check()
    save_plan(loaded.plan, args.output, format=fmt)
    return 0


def register(sub, name: str, help_text: str) -> None:
    add_plan_command(sub, name, help_text, cmd_convert,
                     description="Read a plan (JSON or binary protobuf; older encodings upgraded losslessly) "
                                 "and write it as json, binpb or text.",
                     formats=["json", "binpb", "text"], default_format=None,
                     format_help="output format (default: from the file name, .json JSON, anything else "
                                 "binary; JSON on stdout; text, the explain tree, only when asked for)")
