"""Runs the processes of a local multi-process job for a test and reports them together.

A process that fails leaves the others waiting in a collective step (a barrier, a gather), so
the job is stopped as soon as one process fails or the deadline passes. Each process's output
goes to a log beside the test's temporary directory; the report holds the tail of each.
"""
import pathlib
import subprocess
import time
from typing import Dict, List, Sequence, Tuple


def run_local_job(commands: Sequence[List[str]], env: Dict[str, str], log_dir: pathlib.Path,
                  name: str, timeout: float = 300) -> Tuple[List[int], List[str], str]:
    """Starts one process per command; returns their exit codes, their outputs, and a report
    of both for assertion messages."""
    logs = [open(log_dir / f"{name}-process{i}.log", "w+") for i in range(len(commands))]
    procs = [subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
             for cmd, log in zip(commands, logs)]
    deadline = time.monotonic() + timeout
    try:
        while any(p.poll() is None for p in procs):
            if any(p.poll() not in (None, 0) for p in procs) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    outs = []
    for log in logs:
        log.seek(0)
        outs.append(log.read())
        log.close()
    codes = [p.returncode for p in procs]
    report = "\n".join(f"--- process {i} (exit {c}):\n{out[-3000:]}"
                       for i, (c, out) in enumerate(zip(codes, outs)))
    return codes, outs, report
