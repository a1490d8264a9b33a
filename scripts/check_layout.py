#!/usr/bin/python3
"""scripts/check_layout.py — the layout rules of the source tree, checked.

    scripts/check_layout.py [ROOT]        (ROOT: the checkout, default .)

Prints one line per breach and ends with "layout: N problems"; exits 1
when there is any. The rules (docs/architecture.md, "Layout rules"):

  includes   an actor includes only its own files, the shared actor
             header (actors/actor.h) and the libraries (bus/, common/,
             schemas/, sandbox/, store/); the libraries include no actor;
             the worker includes one exec header; the gateway no actor.
  enums      no strcmp of an enum field's value (a variable or member
             named as the field, or sb_get_str of it) against one of the
             names its enum accepts: such values are decoded to a C enum
             once (schemas/) and compared as enums.
  sizes      no source file over 1,000 lines, no function over 120.
  imports    no integration test imports another test file: what tests
             share lives in a module that is not a test (sbtest.py...).
"""
import os
import re
import sys

SOURCE_DIRS = ("actors", "bus", "cli", "cluster", "common", "gateway", "sandbox",
               "schemas", "store", "workers")
LIBRARIES = ("bus", "cluster", "common", "schemas", "sandbox", "store")
FILE_MAX = 1000
FUNCTION_MAX = 120


def sources(root, exts=(".c", ".h")):
    for top in SOURCE_DIRS:
        base = os.path.join(root, top)
        for dirpath, _, names in os.walk(base):
            for name in sorted(names):
                if name.endswith(exts):
                    path = os.path.join(dirpath, name)
                    yield os.path.relpath(path, root)


def read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        return f.read()


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def actor_of(rel):
    """'actors/exec/tools.c' and 'actors/exec.c' -> 'exec'; None outside actors/."""
    parts = rel.split("/")
    if parts[0] != "actors" or len(parts) < 2:
        return None
    if len(parts) == 2:
        return os.path.splitext(parts[1])[0]
    return parts[1]


def check_includes(root):
    problems = []
    for rel in sources(root):
        top = rel.split("/")[0]
        incs = INCLUDE.findall(read(root, rel))
        mine = actor_of(rel)
        exec_headers = set()
        for inc in incs:
            theirs = actor_of(inc)
            if theirs is None or inc == "actors/actor.h":
                continue
            if top in LIBRARIES:
                problems.append(f"includes: {rel} is a library but includes the actor file {inc}")
            elif top == "gateway":
                problems.append(f"includes: {rel} (gateway) includes the actor file {inc}")
            elif mine is not None and theirs != mine:
                problems.append(f"includes: {rel} (actor {mine}) includes {inc} (actor {theirs})")
            elif top == "workers" and theirs == "exec":
                exec_headers.add(inc)
        if len(exec_headers) > 1:
            problems.append(f"includes: {rel} includes {len(exec_headers)} exec headers "
                            f"({', '.join(sorted(exec_headers))}); the worker uses one")
    return problems


# An enum field row: { "role", SB_T_ENUM, ..., ENUM (sb_llm_roles) } and its
# table: const char *const sb_llm_roles [N] = { "user", "assistant", NULL };
ENUM_TABLE = re.compile(r'const\s+char\s*\*\s*const\s+(\w+)\s*\[[^\]]*\]\s*=\s*\{([^}]*)\}', re.S)
ENUM_ROW = re.compile(r'\{\s*"(\w*)"\s*,\s*SB_T_ENUM\b[^}]*?ENUM(?:_OR_EMPTY)?\s*\(\s*(\w+)\s*\)', re.S)
TYPE_ROW = re.compile(r'(?:\b[A-Z]+\s*\(\s*|\{\s*)"([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*)"\s*,\s*(?:SB_KIND_|s_|sb_|NULL)')
STRCMP = re.compile(r'\bstr(?:n)?cmp\s*\(')
LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')


def enum_fields(root):
    """{field name: set of the names its enum accepts}, and the message and
    tape-entry type names (compared by dispatch, not enums)."""
    tables, rows, types = {}, [], set()
    for rel in sources(root):
        if not rel.startswith("schemas/"):
            continue
        text = read(root, rel)
        for name, body in ENUM_TABLE.findall(text):
            tables[name] = set(LITERAL.findall(body))
        rows += ENUM_ROW.findall(text)
        types.update(TYPE_ROW.findall(text))
    fields = {}
    for field, table in rows:
        fields.setdefault(field, set()).update(tables.get(table, ()))
    return fields, types


def strcmp_calls(line):
    """(first argument, second argument) of each strcmp/strncmp on a line."""
    for m in STRCMP.finditer(line):
        depth, args, cur = 1, [], ""
        for ch in line[m.end():]:
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    break
            if ch == "," and depth == 1:
                args.append(cur)
                cur = ""
            else:
                cur += ch
        args.append(cur)
        if len(args) >= 2:
            yield args[0].strip(), args[1].strip()


def s_subject(expr):
    """What an argument names: the field of sb_get_str (b, "role") or the
    last identifier of run->role; None for a literal."""
    lits = LITERAL.findall(expr)
    if expr.startswith('"'):
        return None
    if lits:
        return lits[-1]
    ids = re.findall(r'[A-Za-z_]\w*', expr)
    return ids[-1] if ids else None


def check_enums(root):
    """A strcmp of a field's value (a variable or member of the field's
    name, or sb_get_str of it) against one of its enum's names."""
    fields, types = enum_fields(root)
    problems = []
    for rel in sources(root, (".c",)):
        if rel.startswith("schemas/"):
            continue        # the name tables themselves
        for n, line in enumerate(read(root, rel).splitlines(), 1):
            for a, b in strcmp_calls(line):
                for subj, other in ((a, b), (b, a)):
                    lit = LITERAL.fullmatch(other)
                    name = s_subject(subj)
                    if not lit or not name or name not in fields:
                        continue
                    value = lit.group(1)
                    if value in fields[name] and value not in types:
                        problems.append(f"enums: {rel}:{n} compares {name} with its enum's name "
                                        f"\"{value}\": decode it (schemas/) and compare enums")
    return problems, sum(len(v) for v in fields.values())


def functions(text):
    """(name, first line, length) of each function: a line starting with
    '{' after a declarator at column 0, to the next line starting with '}'."""
    lines = text.splitlines()
    out, start, name = [], None, None
    for i, line in enumerate(lines):
        if start is None and line.startswith("{"):
            j = i - 1     # the declarator: the last line at column 0 with a '('
            while j >= 0 and not (lines[j][:1].strip() and "(" in lines[j]):
                j -= 1
            m = re.match(r'\s*\**\s*(\w+)\s*\(', lines[j]) if j >= 0 else None
            if m is None and j >= 0:
                m = re.search(r'(\w+)\s*\(', lines[j])
            # a '{' at column 0 after '=' opens a table, not a body
            prev = lines[i - 1].rstrip() if i else ""
            if prev.endswith("=") or prev.endswith(","):
                continue
            start, name = i, m.group(1) if m else "?"
        elif start is not None and line.startswith("}"):
            out.append((name, start + 1, i - start + 1))
            start = None
    return out


def check_sizes(root):
    problems = []
    for rel in sources(root):
        text = read(root, rel)
        n = text.count("\n")
        if n > FILE_MAX:
            problems.append(f"sizes: {rel} has {n} lines (at most {FILE_MAX})")
        if rel.endswith(".c"):
            for name, line, length in functions(text):
                if length > FUNCTION_MAX:
                    problems.append(f"sizes: {rel}:{line} {name} has {length} lines "
                                    f"(at most {FUNCTION_MAX})")
    return problems


IMPORT = re.compile(r'^\s*(?:from\s+(test_\w+)\s+import|import\s+(test_\w+))', re.M)


def check_imports(root):
    problems = []
    base = os.path.join(root, "tests", "integration")
    for name in sorted(os.listdir(base)):
        if not name.endswith(".py"):
            continue
        for a, b in IMPORT.findall(read(root, os.path.join("tests", "integration", name))):
            problems.append(f"imports: tests/integration/{name} imports the test file {a or b}")
    return problems


def main(argv):
    root = argv[1] if len(argv) > 1 else "."
    enum_problems, nvalues = check_enums(root)
    problems = check_includes(root) + enum_problems + check_sizes(root) + check_imports(root)
    for p in problems:
        print(p)
    nfiles = sum(1 for _ in sources(root))
    print(f"layout: {len(problems)} problems in {nfiles} source files "
          f"({nvalues} enum values known)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
