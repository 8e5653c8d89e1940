"""The `jtree` command of the wheel: runs the native CLI shipped in the package (jtree/_bin/jtree).

The binary lives inside the package, not in the wheel's scripts directory, because pip moves
scripts to bin/, away from the libraries auditwheel bundles beside the package (found through a
relative RPATH). This console script replaces itself with the binary (exec: same pid, arguments,
exit status and signals). ``jtree convert`` is the exception: it is Python code
(jtree.convert), run here in-process rather than by the binary starting another interpreter.
"""
import os
import sys


def main() -> None:
    """Runs ``jtree convert`` in this process, any other command by exec'ing the native CLI."""
    if len(sys.argv) > 1 and sys.argv[1] == "convert":
        from .convert._cli import main as convert_main  # noqa: PLC0415

        convert_main(sys.argv[2:])
        return
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "jtree")
    if not os.access(exe, os.X_OK):
        sys.exit(f"jtree: the command-line tool is not in this installation ({exe})")
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
