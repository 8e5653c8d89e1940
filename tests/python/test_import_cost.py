"""What `import jtree` and a first load cost a fresh process: the modules only some calls need
are imported by those calls (asyncio for `await`, concurrent.futures, which imports logging,
for saves and background work; about a quarter of `import jtree`'s time; jtree.convert, for
conversions), never by the import or a load, which is what a server starting up pays."""
import subprocess
import sys

LATE = ("asyncio", "concurrent.futures", "logging", "jtree.convert")


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


def test_first_calls_on_a_bfloat16_file_import_ml_dtypes_only_to_hand_out_its_arrays(tmp_path):
    # Importing ml_dtypes costs a fresh process about 0.6 s: a structure read, a lazy open and
    # torch tensors (which have bfloat16 of their own) do not need it; a NumPy bfloat16 array,
    # or a LeafSpec's dtype once it is read, does.
    p = str(tmp_path / "bf.jtree")
    run(f"import jtree, ml_dtypes, numpy as np\n"
        f"jtree.save({{'w': np.ones((4, 4), ml_dtypes.bfloat16)}}, {p!r})")
    out = run("import sys, jtree, numpy as np, torch\n"
              "seen = lambda: 'ml_dtypes' in sys.modules\n"
              f"s = jtree.load_pytreedef({p!r}); print(seen(), repr(s['w']))\n"
              f"f = jtree.open({p!r}); t = f['w'].get(np.s_[1:3], framework='torch')\n"
              f"t2 = jtree.load({p!r}, framework='torch')['w']\n"
              "print(seen(), t.dtype, t2.dtype)\n"
              "print(s['w'].dtype, seen())\n"
              f"print(jtree.load({p!r})['w'].dtype)\n")
    assert out.split("\n")[:4] == ["False Array(bfloat16[4, 4])",
                                   "False torch.bfloat16 torch.bfloat16",
                                   "bfloat16 True", "bfloat16"]


def test_jtree_convert_is_imported_when_first_used():
    out = run("import sys, jtree\n"
              "print('jtree.convert' in sys.modules)\n"
              "print(callable(jtree.convert), jtree.ConvertStats.__name__)\n"
              "print('jtree.convert' in sys.modules)\n")
    assert out.split("\n")[:3] == ["False", "True ConvertStats", "True"]
