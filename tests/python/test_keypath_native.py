"""Key-path patterns are matched by the C++ library (jtree::KeyPathPatterns, through
_jtree.KeyPathPatterns and jtree._keypath.PatternSet) exactly as keys= selections matched them
when Python did: each component with fnmatch.fnmatchcase, "**" for any number of components.
Compared here with fnmatchcase and with the former Python matcher on many random patterns."""
import fnmatch
import random

import pytest

from jtree import _jtree, _keypath


def _reference_prefix_match(pattern, path):
    # The Python matcher keys= used before the C++ one (jtree._keypath, 2026-11-26).
    if not pattern:
        return True
    head = pattern[0]
    if head == "**":
        return any(_reference_prefix_match(pattern[1:], path[i:]) for i in range(len(path) + 1))
    if not path:
        return False
    return fnmatch.fnmatchcase(path[0], head) and _reference_prefix_match(pattern[1:], path[1:])


def _reference_may_match_below(pattern, path):
    for i, head in enumerate(pattern):
        if head == "**" or i == len(path):
            return True
        if not fnmatch.fnmatchcase(path[i], head):
            return False
    return True


@pytest.mark.parametrize("glob, text, want", [
    ("[z-a]", "a", False),     # an empty range matches nothing
    ("[!z-a]", "q", True),     # ... and its negation anything
    ("[]]", "]", True),        # ']' first is itself
    ("[!]]", "]", False),
    ("[!]]", "a", True),
    ("[a-]", "-", True),       # '-' last is itself
    ("[-a]", "-", True),
    ("[a-c-e]", "-", True),    # fnmatch reads "a-c", "-", "e"
    ("[a-c-e]", "d", False),
    ("[\\]", "\\", True),      # no escapes in a component: '\' is itself
    ("[ab", "[ab", True),      # '[' without ']' is itself
    ("?", "😀", True),         # one code point, not one byte
    ("??", "é", False),
    ("*é*", "café au lait", True),
    ("[à-ü]", "é", True),      # ranges by code point
    ("[^a]", "^", True),       # '^' is not a negation in fnmatch
    ("[^a]", "b", False),
    ("a*b*c", "aXbYbZc", True),
    ("a*b*c", "aXbYbZ", False),
    ("**", "anything", True),  # (two '*' in one component)
    ("", "", True),
    ("", "a", False),
])
def test_components_match_as_fnmatchcase_does(glob, text, want):
    assert fnmatch.fnmatchcase(text, glob) is want  # (the reference, checked)
    assert _jtree.glob_match(glob, text) is want


@pytest.mark.parametrize("seed", range(4))
def test_random_components_match_as_fnmatchcase_does(seed):
    rng = random.Random(seed)
    alphabet = list("*?[]!-^\\acxz&|~") + ["é", "😀"]
    matched = compared = 0
    for _ in range(20000):
        glob = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9)))
        # Texts made of the glob's own characters (and a few more), so that sets and ranges
        # match often enough to tell.
        chars = [c for c in glob if c not in "*?"] + list("abcdyz-") + ["é"]
        text = "".join(rng.choice(chars) for _ in range(rng.randint(0, 5)))
        want = fnmatch.fnmatchcase(text, glob)
        assert _jtree.glob_match(glob, text) is want, (glob, text)
        matched += want
        compared += 1
    assert matched > compared // 100  # (not a comparison of "no match" alone: ~3% match)


@pytest.mark.parametrize("seed", range(3))
def test_patterns_select_as_the_python_matcher_did(seed):
    rng = random.Random(100 + seed)
    components = ["a", "b", "ab", "*", "?", "a*", "[ab]", "[!a]", "**", "0", "1", "é"]
    keys = ["a", "b", "ab", "ba", "0", "1", "10", "é", ""]
    for _ in range(3000):
        patterns = ["/".join(rng.choice(components) for _ in range(rng.randint(0, 4)))
                    for _ in range(rng.randint(1, 3))]
        ps = _keypath.PatternSet(patterns)
        split = [tuple(_keypath.split(p)) for p in patterns]
        assert ps.may_walk_everything() == any(
            not p or any(c in p[0] for c in "*?[") for p in split)
        for _ in range(10):
            path = [rng.choice(keys) for _ in range(rng.randint(0, 5))]
            want = {i for i, p in enumerate(split) if _reference_prefix_match(p, tuple(path))}
            assert set(ps.native.matching(path)) == want, (patterns, path)
            assert ps.selects(path) is bool(want)
            pending = set(range(len(patterns)))
            assert ps.selects(path, pending) is bool(want)
            assert pending == set(range(len(patterns))) - want
            assert ps.may_select_below(path) is any(
                _reference_may_match_below(p, tuple(path)) for p in split), (patterns, path)


def test_a_pattern_ending_with_an_unfinished_escape_is_invalid():
    import jtree
    with pytest.raises(jtree.InvalidArgumentError, match="pattern .a.*unfinished escape"):
        _keypath.PatternSet(["ok", "a\\"])
    with pytest.raises(jtree.InvalidArgumentError, match="keys must be"):
        _keypath.PatternSet([1])


def test_many_double_stars_do_not_take_exponential_time(tmp_path):
    # "**/a" thirty times then "x", against a chain of 60 "a" keys without an "x": trying
    # every split of every "**" would not end; the selection is refused at once instead.
    import jtree  # noqa: PLC0415

    tree = leaf = {}
    for _ in range(59):
        leaf["a"] = {}
        leaf = leaf["a"]
    leaf["a"] = 1
    p = str(tmp_path / "deep.jtree")
    jtree.save(tree, p)
    pattern = "/".join(["**/a"] * 30 + ["x"])
    with pytest.raises(jtree.NotFoundError, match="matched nothing|match"):
        jtree.load(p, keys=pattern)
    ps = _keypath.PatternSet(["**/**/**/w"])  # ("**/**" is "**")
    assert ps.selects(("w",)) and ps.selects(("a", "b", "w")) and not ps.selects(("a",))
