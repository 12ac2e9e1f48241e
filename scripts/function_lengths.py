#!/usr/bin/env python3
"""Lengths of the functions defined in C++ source files, longest first.

    scripts/function_lengths.py [--max N [--allow NAME]...] [--exclude DIR]... [FILE_OR_DIR ...]
                                (default: src/proxy)

A definition is what the house style (clang-format) makes it: a signature starting in column 0
(a free function) or 2 (a member function defined in its class) and a body closed by a `}` alone
at that column; the length counts the lines from the signature's
first to the closing brace. Classes, structs, enums and namespaces are not functions. With
--max N, exits 1 when a function is longer than N lines (lists those), else prints the ten
longest; --allow NAME (Class::function) exempts one function from --max, for a known exception
that another change is taking apart; --exclude DIR leaves out the files under DIR."""
import re
import sys
from pathlib import Path

SKIP = ("namespace", "struct", "class", "enum", "union", "template", "#", "//", "/*", "*", "}",
        "using", "static_assert", "extern", "typedef")
ACCESS = ("public:", "private:", "protected:")


RAW_OPEN = re.compile(r'R"([^ ()\\\t]{0,16})\(')


def code_lines(text):
    """The file's lines with the insides of raw string literals blanked: embedded HTML, CSS or
    JavaScript (src/admin/dashboard_assets.cpp) has braces in column 0 that are not C++."""
    out, closing = [], None
    for line in text.splitlines():
        if closing is not None:
            end = line.find(closing)
            if end < 0:
                out.append("")
                continue
            line, closing = " " * (end + len(closing)) + line[end + len(closing):], None
        while closing is None and (m := RAW_OPEN.search(line)):
            close = ")" + m.group(1) + '"'
            end = line.find(close, m.end())
            if end < 0:
                line, closing = line[:m.start()] + '""', close
            else:
                line = line[:m.start()] + '""' + line[end + len(close):]
        out.append(line)
    return out


def functions(path):
    lines = code_lines(path.read_text())
    i = 0
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip(" "))
        body = line[indent:]
        # Free functions start in column 0, member functions defined in a class body in column 2.
        if not body or indent not in (0, 2) or body.startswith(SKIP) or body.startswith(ACCESS):
            i += 1
            continue
        # The signature may span lines; it opens its body with a `{` ending one of them.
        # A line ending in `;` or `}` ends a declaration or a one-line definition.
        j = i
        while j < len(lines) and not lines[j].rstrip().endswith(("{", ";", "}")):
            j += 1
        signature = " ".join(lines[i:j + 1])
        if j >= len(lines) or not lines[j].rstrip().endswith("{") or "=" in body.split("(")[0]:
            i = j + 1
            continue
        closing = " " * indent + "}"
        k = j + 1
        while k < len(lines) and lines[k].rstrip() not in (closing, closing + ";"):
            k += 1
        if "(" in signature:  # not a braced initializer of data
            head = body.split("(")[0].split()
            name = head[-1] if head else body.strip()
            yield k - i + 1, f"{path}:{i + 1}", name
        i = k + 1


def main(argv):
    if argv[:1] in (["--help"], ["-h"]):
        print(__doc__)
        return 0
    limit, allowed, excluded = None, set(), []
    if argv[:1] == ["--max"]:
        limit, argv = int(argv[1]), argv[2:]
    while argv[:1] in (["--allow"], ["--exclude"]):
        if argv[0] == "--allow":
            allowed.add(argv[1])
        else:
            excluded.append(Path(argv[1]).resolve())
        argv = argv[2:]
    roots = [Path(a) for a in argv] or [Path(__file__).resolve().parent.parent / "src/proxy"]
    files = [f for r in roots for f in (sorted(r.rglob("*.cpp")) if r.is_dir() else [r])
             if not any(f.resolve().is_relative_to(d) for d in excluded)]
    found = sorted((f for path in files for f in functions(path)), reverse=True)
    over = [f for f in found if limit is not None and f[0] > limit and f[2] not in allowed]
    for length, where, name in over if limit is not None else found[:10]:
        print(f"{length:5d}  {name}  {where}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
