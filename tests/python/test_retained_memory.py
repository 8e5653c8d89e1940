"""Memory a process keeps after a load (the read workers' scratch buffers,
lib/src/util/scratch_cache.h), through bench/python/retained_memory.py: fresh processes load a
128 MiB bf16 array (32 compressed chunks of 4 MiB) with 64 workers and free it. Each worker's
buffers used to stay with its thread for the life of the process (157 MiB kept, measured);
now at most 64 MiB is kept between calls, whatever the number of workers."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "python", "retained_memory.py")


def test_a_load_on_64_workers_keeps_at_most_the_scratch_bound(tmp_path):
    p = subprocess.run([sys.executable, SCRIPT, "--threads", "1,64", "--runs", "1",
                        "--workdir", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = {int(m.group(1)): (float(m.group(2)), float(m.group(3)))
            for m in re.finditer(r"^installed +(\d+) +[\d.]+ +(-?[\d.]+) +(-?[\d.]+)$", p.stdout,
                                 re.M)}
    assert set(rows) == {1, 64}, p.stdout
    kept_64 = rows[64][1]
    # 64 MiB of scratch sets at most, plus what the interpreter itself keeps of the load.
    assert kept_64 < 80, p.stdout
    assert not os.listdir(tmp_path), "the script's file was not removed"


def test_release_scratch_memory_gives_back_what_loads_and_saves_kept(tmp_path):
    import ml_dtypes
    import numpy as np

    import jtree
    w = (np.random.default_rng(1).standard_normal((512, 4096), dtype=np.float32) * 0.02).astype(
        ml_dtypes.bfloat16)
    path = str(tmp_path / "w.jtree")
    jtree.save({"w": w}, path)  # compressed chunks: the save's workers keep their buffers
    assert jtree.release_scratch_memory() > 0
    assert jtree.release_scratch_memory() == 0
    back = jtree.load(path)["w"]  # decoded in scratch buffers, kept for the next load
    assert np.array_equal(back.view(np.uint16), w.view(np.uint16))
    assert jtree.release_scratch_memory() > 0
    assert jtree.release_scratch_memory() == 0
