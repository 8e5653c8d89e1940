"""The command line every atheris harness of this folder shares (fuzz_load.py,
fuzz_convert_gguf.py, fuzz_convert_safetensors.py): fuzz with atheris, ``--replay`` files
without it, or ``--make-corpus`` to write the harness's seeds.

A harness imports it before anything else of its own (it needs ``fuzzing()`` to decide
whether to import atheris and instrument jtree) and ends with ``if __name__ == "__main__":
harness_main.main(test_one_input, make_corpus)``. Its ``replay`` stays the harness's own
name (tests call ``harness.replay(paths)``), a one-line call of ``replay`` here.
"""
from __future__ import annotations

import os
import shutil
import sys
import traceback
from typing import Callable, List, Optional

_NO_ATHERIS_MODES = ("--replay", "--make-corpus")


def fuzzing() -> bool:
    """True when this run fuzzes (atheris needed): not ``--replay`` nor ``--make-corpus``."""
    return not (len(sys.argv) > 1 and sys.argv[1] in _NO_ATHERIS_MODES)


def input_files(paths: List[str]) -> List[str]:
    """The files named by ``paths``: files as given, directories' files in name order (their
    hidden files and READMEs left out); paths that do not exist are passed over."""
    files: List[str] = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p)
                            if not f.startswith(".") and not f.endswith(".md"))
        elif os.path.exists(p):
            files.append(p)
    return files


def replay(test_one_input: Callable[[bytes], None], paths: List[str], note: str = "") -> int:
    """Runs every file under ``paths`` once through ``test_one_input``, reporting each one that
    raised (every finding, not only the first); returns 1 if any did, else 0. ``note`` goes in
    the summary line after the count."""
    files = input_files(paths)
    failed = 0
    for name in files:
        with open(name, "rb") as f:
            data = f.read()
        try:
            test_one_input(data)
        except BaseException:  # noqa: BLE001 - report every finding, then fail
            failed += 1
            print(f"FAILED: {name}", file=sys.stderr)
            traceback.print_exc()
    print(f"replayed {len(files)} inputs{note}: {failed} failed")
    return 1 if failed else 0


def main(test_one_input: Callable[[bytes], None], make_corpus: Callable[[str], None],
         scratch: Optional[str] = None, replay_note: str = "") -> None:
    """The harness's command line (see the module docstring); ``scratch``, a directory the
    harness made, is removed however the run ends."""
    try:
        if len(sys.argv) > 1 and sys.argv[1] == "--replay":
            sys.exit(replay(test_one_input, sys.argv[2:], replay_note))
        if len(sys.argv) > 1 and sys.argv[1] == "--make-corpus":
            make_corpus(sys.argv[2])
            return
        import atheris  # noqa: PLC0415 - only fuzzing needs it (the harness imported it already)

        atheris.Setup(sys.argv, test_one_input)
        atheris.Fuzz()
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
