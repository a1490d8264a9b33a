#!/usr/bin/python3
"""The source tree keeps its layout rules (scripts/check_layout.py,
docs/architecture.md "Layout rules"): the tree as it is passes, and each
rule fires on a tree that breaks it, so that the check itself can fail.
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import ROOT, check, run_tests, tmpdir  # noqa: E402

SCRIPT = os.path.join(ROOT, "scripts", "check_layout.py")


def _check(root):
    p = subprocess.run(["/usr/bin/python3", SCRIPT, root], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout


def _write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def _tree():
    """A copy of the tree's sources and tests, to break."""
    d = tmpdir()
    for top in ("actors", "bus", "cli", "cluster", "common", "gateway", "sandbox", "schemas", "store", "workers"):
        if os.path.isdir(os.path.join(ROOT, top)):
            shutil.copytree(os.path.join(ROOT, top), os.path.join(d, top))
    shutil.copytree(os.path.join(ROOT, "tests", "integration"), os.path.join(d, "tests", "integration"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    return d


def test_the_tree_keeps_its_layout():
    rc, out = _check(ROOT)
    check(rc == 0, "scripts/check_layout.py found problems:\n%s", out)
    check("layout: 0 problems" in out, "no summary line: %r", out[-300:])


def test_each_rule_fires_on_a_tree_that_breaks_it():
    d = _tree()
    rc, out = _check(d)
    check(rc == 0, "the copy should pass as the tree does:\n%s", out)
    # an actor reaching into another actor, a library into an actor
    _write(d, "actors/run/zz_reach.c", '#include "actors/exec/tools.h"\n')
    _write(d, "common/zz_reach.c", '#include "actors/session.h"\n')
    # a file and a function too long
    _write(d, "common/zz_long.c", "int x;\n" * 1001)
    _write(d, "common/zz_fn.c", "static int\ns_long (void)\n{\n" + "    x++;\n" * 130 + "}\n")
    # a test importing another test
    _write(d, "tests/integration/test_zz_import.py", "from test_layout import _check\n")
    rc, out = _check(d)
    check(rc == 1, "a broken tree passed:\n%s", out)
    for want in ("actors/run/zz_reach.c (actor run) includes actors/exec/tools.h",
                 "common/zz_reach.c is a library but includes the actor file actors/session.h",
                 "common/zz_long.c has 1001 lines",
                 "common/zz_fn.c:3 s_long has 132 lines",
                 "test_zz_import.py imports the test file test_layout"):
        check(want in out, "the check missed %r:\n%s", want, out)


def test_a_strcmp_against_an_enum_value_is_found():
    d = _tree()
    _write(d, "schemas/zz_enum.c",
           'static const char *const s_zz_names [] = { "zzalpha", "zzbeta", NULL };\n'
           'static const sb_field_t s_zz [] = {\n'
           '    { "mode", SB_T_ENUM, false, 16, NULL, "zzalpha | zzbeta", ENUM (s_zz_names) },\n'
           '};\n')
    _write(d, "actors/run/zz_cmp.c",
           'int f (const char *mode) { return strcmp (mode, "zzbeta") == 0; }\n'
           'int g (const sb_val_t *b) { return strcmp (sb_get_str (b, "mode"), "zzalpha") == 0; }\n'
           'int h (const char *sandbox) { return strcmp (sandbox, "zzbeta") == 0; }\n')
    rc, out = _check(d)
    check(rc == 1, "a strcmp against an enum value passed:\n%s", out)
    for want in ('actors/run/zz_cmp.c:1 compares mode with its enum\'s name "zzbeta"',
                 'actors/run/zz_cmp.c:2 compares mode with its enum\'s name "zzalpha"'):
        check(want in out, "the check missed %r:\n%s", want, out)
    # another vocabulary that shares the word is not this enum
    check("zz_cmp.c:3" not in out, "a variable of another name was taken for the enum:\n%s", out)


if __name__ == "__main__":
    run_tests(globals())
