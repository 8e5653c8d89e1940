"""Smoke test of the installed wheel (scripts/test_wheel.sh runs it in a fresh venv, from a
directory outside the source tree, so that only the installed package can be imported):
    python wheel_smoke.py SCRATCH_DIR
save, load, a lazy slice (only some chunks read), bfloat16 through the [ml] extra (ml_dtypes),
and that the package imported is the installed one, not a checkout."""
import os
import sys
import sysconfig

import ml_dtypes
import numpy as np

import jtree

scratch = sys.argv[1]
site = sysconfig.get_paths()["purelib"]
assert os.path.realpath(jtree.__file__).startswith(os.path.realpath(site)), (
    f"jtree imported from {jtree.__file__}, not from the venv's {site}")

path = os.path.join(scratch, "smoke.jtree")
emb = np.arange(4000 * 256, dtype=np.float32).reshape(4000, 256)
half = (np.arange(64, dtype=np.float32) / 8).astype(ml_dtypes.bfloat16)
tree = {"params": {"emb": emb, "half": half}, "step": 7, "name": "smoke", "opt": [None, (1.5,)]}
stats = jtree.save(tree, path)

back = jtree.load(path)
assert back["step"] == 7 and back["name"] == "smoke" and back["opt"] == [None, (1.5,)], back
np.testing.assert_array_equal(back["params"]["emb"], emb)
assert back["params"]["half"].dtype == ml_dtypes.bfloat16
np.testing.assert_array_equal(back["params"]["half"], half)

with jtree.open(path) as f:
    rows = f["params"]["emb"][1000:1010, :64]
np.testing.assert_array_equal(rows, emb[1000:1010, :64])
print(f"wheel smoke ok: jtree {jtree.__version__} from {os.path.dirname(jtree.__file__)}, "
      f"{os.path.getsize(path)} bytes saved")
