"""``python -m jtree.convert SRC DST [options]``: the command line of jtree.convert()."""
from ._cli import main

if __name__ == "__main__":
    main()
