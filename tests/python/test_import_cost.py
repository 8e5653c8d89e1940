"""What `import jtree` and a first load cost a fresh process: the modules only some calls need
are imported by those calls (asyncio for `await`, concurrent.futures, which imports logging,
for saves and background work; about a quarter of `import jtree`'s time), never by the
import or a load, which is what a server starting up pays."""
import subprocess
import sys

LATE = ("asyncio", "concurrent.futures", "logging")


def run(code):
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_import_and_load_do_not_import_what_they_do_not_use(tmp_path):
    p = str(tmp_path / "a.jtree")
    run(f"import jtree, numpy as np; jtree.save({{'w': np.ones(3)}}, {p!r})")
    out = run("import sys, jtree\n"
              f"print(sorted(m for m in {LATE!r} if m in sys.modules))\n"
              f"t = jtree.load({p!r}); f = jtree.open({p!r}); f['w'][:2]\n"
              f"jtree.load_pytreedef({p!r}); jtree.load({p!r}, keys='w')\n"
              f"print(sorted(m for m in {LATE!r} if m in sys.modules))\n")
    assert out.split("\n")[:2] == ["[]", "[]"]


def test_saves_and_awaits_import_them_when_used(tmp_path):
    p = str(tmp_path / "b.jtree")
    out = run("import asyncio, sys, jtree, numpy as np\n"
              f"jtree.save({{'w': np.arange(3)}}, {p!r})\n"
              "print('concurrent.futures' in sys.modules)\n"
              f"async def main(): return await jtree.nonblocking_load({p!r})\n"
              "print(asyncio.run(main())['w'].tolist())\n")
    assert out.split("\n")[:2] == ["True", "[0, 1, 2]"]
