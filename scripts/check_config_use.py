#!/usr/bin/env python3
"""Two rules of the config module (docs/architecture.md, "Config"), checked over src/:
  1. No string comparison of a config value outside src/config: closed sets are enums parsed by
     the loader (config::Balance, LogLevel, ...), so `x.balance == "hash"` or
     `c.store == "memory"` outside src/config is an error.
  2. A key's name is written once, in its section's key table (src/config/load_*.cpp): code that
     needs a key's node, path or name finds its row by member (Read::at<&Section::member>(),
     name_in<&Section::member>(table)). Any other string literal equal to a key name in
     src/config or src/runtime/diff.cpp (the code that reads keys or compares them) is counted,
     and the count may not grow past the number recorded below. Words that are values or nouns
     of a message, not keys, are listed in VALUE_WORDS with where they are used.
Usage: check_config_use.py [--max-repeated N]   (exit 1 on a violation)"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
CONFIG_HEADERS = [ROOT / "include/sluice/config/config.hpp", ROOT / "include/sluice/config/idempotency.hpp"]
# The repeated key names left today (rule 2).
MAX_REPEATED = 0
# Literals that happen to equal a key's name but are a value or a message's noun there, and the
# files where they are that.
VALUE_WORDS = {
    "on": {"loader.cpp", "load_upstream.cpp", "load_server.cpp"},  # a switch's effective value ("admin: off -> on")
    "off": {"loader.cpp", "load_upstream.cpp", "load_server.cpp"},  # ... and forwarded_header's
    "add": {"load_server.cpp"},  # forwarded_header = "add", not the header rules' `add`
    "timeout": {"fail_on.cpp", "load_retry.cpp"},  # a failure word of fail_on / retry.on
    "header": {"config.cpp"},  # the hash key kind `header:NAME`, not idempotency.header
    "upstream": {"loader.cpp"},  # the noun of "unknown upstream 'x'" and "1 upstream"
    "server": {"loader.cpp"},  # the noun of check's summary, "(3 servers)"
    "route": {"loader.cpp"},  # ... and "0 routes"
    "key": {"reader.cpp"},  # the noun of "unknown key 'x'"
}
KEY_CODE = [SRC / "config", SRC / "runtime" / "diff.cpp"]


def string_members():
    """Names of the std::string members of the config structs."""
    names = set()
    for header in CONFIG_HEADERS:
        names |= set(re.findall(r"^\s+std::string (\w+)(?: = [^;]*)?;", header.read_text(), re.M))
    # Members whose names other types share (a URL parameter's value, a metric label's name):
    # a config struct's member of that name is not compared with a literal anywhere.
    return names - {"value", "name"}


def sources(outside_config):
    for path in sorted(SRC.rglob("*.[ch]pp")):
        if outside_config and path.is_relative_to(SRC / "config"):
            continue
        yield path


def string_comparisons():
    members = "|".join(sorted(string_members()))
    compare = re.compile(
        rf"(?:\.|->)(?:{members})\s*(?:==|!=)\s*\"|\"\s*(?:==|!=)\s*[\w.>-]*(?:\.|->)(?:{members})\b")
    found = []
    for path in sources(outside_config=True):
        for number, text in enumerate(path.read_text().splitlines(), 1):
            if compare.search(text) and not text.lstrip().startswith("//"):
                found.append(f"{path.relative_to(ROOT)}:{number}: compares a config string: {text.strip()}")
    return found


# A table row: `string_key<&S::m>("name"`, `value_key<&S::m, parse, text>(\n "name"`, ...
ROW = re.compile(r"\b(?:string|bool|strings|integer|duration|size|number|choice|custom|value)_key"
                 r"(?:<.*?>)?\(\s*\"(\w+)\"", re.S)
LITERAL = re.compile(r"\"\.?(\w+)\"")


def key_names():
    """Key name -> table rows declaring it, from the key tables of src/config."""
    names = {}
    for path in sorted((SRC / "config").glob("*.cpp")):
        for name in ROW.findall(path.read_text()):
            names[name] = names.get(name, 0) + 1
    return names


def repeated_key_names():
    names = key_names()
    found = []
    for path in sources(outside_config=False):
        if not any(path == p or path.is_relative_to(p) for p in KEY_CODE):
            continue
        text = path.read_text()
        rows = {m.start(1) - 1 for m in ROW.finditer(text)}  # where each row's name literal starts
        comment = re.compile(r"//[^\n]*")
        comments = [m.span() for m in comment.finditer(text)]
        for m in LITERAL.finditer(text):
            name = m.group(1)
            if name not in names or path.name in VALUE_WORDS.get(name, ()) or m.start() in rows:
                continue
            if any(a <= m.start() < b for a, b in comments):
                continue
            number = text.count("\n", 0, m.start()) + 1
            found.append(f"{path.relative_to(ROOT)}:{number}: key name \"{name}\" written again")
    return found


def main():
    limit = MAX_REPEATED
    if "--max-repeated" in sys.argv:
        limit = int(sys.argv[sys.argv.index("--max-repeated") + 1])
    bad = string_comparisons()
    for line in bad:
        print(line)
    repeated = repeated_key_names()
    if len(repeated) > limit:
        for line in repeated:
            print(line)
        print(f"{len(repeated)} key names written outside their table (at most {limit})")
    print(f"config strings compared outside src/config: {len(bad)}; key names written again: {len(repeated)} "
          f"(at most {limit})")
    return 1 if bad or len(repeated) > limit else 0


if __name__ == "__main__":
    sys.exit(main())
