"""Writes the consumers' input with the Python package (tests/install/test_consumers.sh):
    python write_fixture.py DIR
DIR/py.jtree holds params/w (float32, 1100 x 1024: several compressed chunks), params/tok
(int64) and step; DIR/<leaf>.bin holds each array's bytes as NumPy has them in memory, which the
consumers' output must equal byte for byte."""
import os
import sys

import numpy as np

import jtree

out = sys.argv[1]
w = (np.arange(1100 * 1024, dtype=np.float32).reshape(1100, 1024) % 977) * 0.25 - 3.0
tok = np.arange(-500, 500, dtype=np.int64) * 7919
jtree.save({"params": {"w": w, "tok": tok}, "step": 3}, os.path.join(out, "py.jtree"))
w.tofile(os.path.join(out, "w.bin"))
tok.tofile(os.path.join(out, "tok.bin"))
print(f"wrote {out}/py.jtree with jtree {jtree.__version__} from {os.path.dirname(jtree.__file__)}")
