"""bench/python/inline_threshold.py (a benchmark, not a timed test): it runs, and the storage it
reports for each threshold is what the files hold (a payload over the threshold goes into a
chunk, one at or under it into the header), the writer's default included."""
import os
import re
import subprocess
import sys

import jtree

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "python", "inline_threshold.py")


def test_reports_inline_and_chunked_as_the_files_hold(tmp_path):
    out = subprocess.run(
        [sys.executable, SCRIPT, "--runs", "1", "--parts", "sizes", "--sizes", "600",
         "--thresholds", "1024,512", "--workdir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=True).stdout
    row = next(line for line in out.splitlines() if line.startswith("| 600 |"))
    cells = row.split("|")[2:4]
    assert re.search(r"ms \(inline, ", cells[0]), row
    assert re.search(r"ms \(chunked, ", cells[1]), row
    assert not os.listdir(tmp_path)  # its work directory is removed


def test_default_threshold_is_512_bytes(tmp_path):
    import numpy as np

    p = str(tmp_path / "t.jtree")
    jtree.save({"at": np.zeros(128, np.float32), "over": np.zeros(129, np.float32)}, p)
    with jtree.open(p) as f:
        assert f.info()["inline_bytes"] == 512
        assert f.info()["num_chunks"] == 1
