"""Counts the Python functions and module hops of one load to a device (issue 48):
``jtree.load(path, framework="torch", device=...)`` traced with sys.setprofile, through the
host stand-in engine where the machine has no GPU (device="cpu" then stands for "cuda:0").

A function is a distinct (module, name) of python/jtree that the call enters; a hop is a call
or return that moves from one python/jtree module to another. A warm-up load runs first, so
imports and first-call caches are not counted.

    PYTHONPATH=python python bench/python/load_call_trace.py [--leaves N]
"""
import argparse
import contextlib
import os
import sys
import tempfile

import numpy as np


def _module_of(frame):
    """The python/jtree module a frame runs in ("jtree._load"...), or None."""
    path = frame.f_code.co_filename.replace(os.sep, "/")
    if "/jtree/" not in path or not path.endswith(".py"):
        return None
    return "jtree." + path.rsplit("/jtree/", 1)[1][:-3].replace("/", ".")


def trace(call):
    """(distinct functions, module hops) of python/jtree while ``call()`` runs."""
    functions = set()
    hops = 0
    where = [None]

    def profile(frame, event, _arg):
        nonlocal hops
        if event not in ("call", "return"):
            return
        # (A call runs in the callee's module; a return goes back to the caller's.)
        here = frame if event == "call" else frame.f_back
        module = _module_of(here) if here is not None else None
        if event == "call" and module is not None:
            functions.add((module, frame.f_code.co_qualname))
        if module is not None and module != where[0]:
            if where[0] is not None:
                hops += 1
            where[0] = module

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return functions, hops


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--leaves", type=int, default=4)
    ap.add_argument("--list", action="store_true", help="print the functions")
    args = ap.parse_args()
    import torch
    import jtree
    from jtree import _device

    path = os.path.join(tempfile.mkdtemp(), "t.jtree")
    jtree.save({f"w{i}": np.ones((64, 64), np.float32) for i in range(args.leaves)}, path)
    device = "cuda:0" if torch.cuda.is_available() else "cpu"
    with _device.host_stand_in_for_tests() if device == "cpu" else contextlib.nullcontext():
        jtree.load(path, framework="torch", device=device)
        functions, hops = trace(lambda: jtree.load(path, framework="torch", device=device))
    modules = {m for m, _ in functions}
    print(f"jtree.load(path, framework='torch', device={device!r}), {args.leaves} leaves: "
          f"{len(functions)} Python functions in {len(modules)} modules, {hops} module hops")
    if args.list:
        for m, f in sorted(functions):
            print(f"  {m}.{f}")


if __name__ == "__main__":
    main()
