#!/usr/bin/env python3
"""Builds a gatehouse adapter or policy component from a Python module with componentize-py.

    sdk-py/.venv/bin/python sdk-py/build.py app.py --world adapter --out app.wasm

SOURCE is the app module (``app.py``); it defines ``class WitWorld`` (an ``Adapter`` or a
``Policy`` from ``gatehouse_sdk``). Its directory and this SDK are the component's Python
path: keep virtual environments and large files out of that directory. Then embed a manifest
and sign: ``gatehouse pack app.wasm --manifest manifest.toml --key KEY``.
"""

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

SDK = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="build.py",
        description="Build a gatehouse component from a Python module (componentize-py).",
    )
    parser.add_argument("source", help="the app module, e.g. app.py; it defines class WitWorld")
    parser.add_argument("-w", "--world", choices=["adapter", "policy"], default="adapter")
    parser.add_argument("-o", "--out", required=True, help="where to write the component")
    args = parser.parse_args()

    source = Path(args.source).resolve()
    if source.suffix != ".py" or not source.is_file():
        parser.error(f"SOURCE must be a .py file: {args.source}")
    tool = Path(sys.executable).parent / "componentize-py"
    if not tool.exists():
        tool = shutil.which("componentize-py")
    if tool is None:
        print(
            "build.py: componentize-py is not installed; run "
            f"`python3 -m venv {SDK}/.venv && {SDK}/.venv/bin/pip install -r {SDK}/requirements.txt` "
            "(or `build-support/toolchains` in the gatehouse repository)",
            file=sys.stderr,
        )
        return 2
    print(f"componentizing {args.source} as the {args.world} world (this takes a while)...", file=sys.stderr)
    command = [
        str(tool),
        "--quiet",
        "-d", str(SDK / "wit"),
        "-w", args.world,
        "componentize",
        "-p", str(source.parent),
        "-p", str(SDK / "src"),
        "-o", str(Path(args.out).resolve()),
        source.stem,
    ]
    # componentize-py is a Rust program: without this, an error in the app prints its backtrace.
    done = subprocess.run(command, env={**os.environ, "RUST_BACKTRACE": "0"})
    if done.returncode != 0:
        print(f"build.py: componentize-py failed (exit {done.returncode})", file=sys.stderr)
        return 2
    size = Path(args.out).stat().st_size / 1048576
    print(f"wrote {args.out} ({size:.1f} MiB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
