#!/usr/bin/env python3
"""Compare the driver matrix outputs: DIR/<driver>.direct.jsonl against
DIR/<driver>.keyshard.jsonl, case by case (test/drivers/run.sh runs it).

Usage: compare.py DIR DRIVER...

Each line of an output is {"case": name, "result": ...}. Results are compared
after normalization (VOLATILE below: values that differ between any two
connections, such as connection ids in driver messages). Prints a table
(driver, case, same/DIFF, where the answers first part, direct value,
keyshard value; for a case that is the same, its answer), then every
difference in full.
Exit status 1 when a case differs or is missing on one side.
"""
import json
import os
import re
import sys

# Values that differ between two runs against the same server; replaced
# before comparing (and shown replaced).
VOLATILE = [
    (re.compile(r"\(conn=\d+\)"), "(conn=N)"),
    (re.compile(r"\b\d+ milliseconds\b"), "N milliseconds"),
]
WIDTH = 46

# The one answer keyshard gives differently on purpose: the greeting's
# version names keyshard in place of the server's distribution suffix
# ("10.11.19-MariaDB-0+deb12u1-log" -> "10.11.19-MariaDB-keyshard", see
# proxy/identity.go). The direct run's greeting fields of the
# server_version case are rewritten so; anything else keyshard greets
# with still differs. SELECT VERSION() is the server's on both sides.
GREETING_FIELDS = ("greeting", "version")


def keyshard_greeting(v):
    i = v.find("-MariaDB")
    if i >= 0:
        return v[: i + len("-MariaDB")] + "-keyshard"
    return v.split("-", 1)[0] + "-keyshard"


def expect_greeting(name, result):
    if name == "server_version" and isinstance(result, dict):
        return {k: keyshard_greeting(x) if k in GREETING_FIELDS and isinstance(x, str) else x for k, x in result.items()}
    return result


def normalize(v):
    if isinstance(v, str):
        for rx, rep in VOLATILE:
            v = rx.sub(rep, v)
        return v
    if isinstance(v, list):
        return [normalize(x) for x in v]
    if isinstance(v, dict):
        return {k: normalize(x) for k, x in v.items()}
    return v


def load(path):
    """Cases of one run in order, plus a note on how the run ended."""
    cases = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    o = json.loads(line)
                    cases[o["case"]] = normalize(o["result"])
                except (ValueError, KeyError) as e:
                    cases[f"(line {n})"] = f"unparsable output: {e}: {line[:200]}"
    except FileNotFoundError:
        pass
    note = ""
    try:
        rc = open(path + ".rc").read().strip()
        if rc != "0":
            err = open(path + ".err", encoding="utf-8", errors="replace").read().strip().splitlines()
            note = f"exit {rc}" + (f": {err[-1][:300]}" if err else "")
    except FileNotFoundError:
        note = "not run"
    return cases, note


def short(v):
    s = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    return s if len(s) <= WIDTH else s[: WIDTH - 3] + "..."


def diff_paths(a, b, path=""):
    """The paths where a and b differ, with both values: as deep as both
    sides have the same shape (same keys, same length)."""
    if isinstance(a, dict) and isinstance(b, dict) and list(a) == list(b):
        out = []
        for k in a:
            out += diff_paths(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff_paths(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [(path or ".", a, b)]


def main():
    out_dir, drivers = sys.argv[1], sys.argv[2:]
    table, details, notes = [], [], []
    for drv in drivers:
        direct, dnote = load(os.path.join(out_dir, f"{drv}.direct.jsonl"))
        direct = {n: expect_greeting(n, r) for n, r in direct.items()}
        proxied, knote = load(os.path.join(out_dir, f"{drv}.keyshard.jsonl"))
        if dnote:
            notes.append(f"{drv} direct run: {dnote}")
        if knote:
            notes.append(f"{drv} keyshard run: {knote}")
        names = list(direct) + [n for n in proxied if n not in direct]
        if not names:
            table.append((drv, "(no cases)", "DIFF", "", dnote or "-", knote or "-"))
            continue
        for name in names:
            a = direct.get(name, "(missing)")
            b = proxied.get(name, "(missing)")
            if a == b and name in direct and name in proxied:
                table.append((drv, name, "same", "", short(a), "="))
                continue
            # The table shows where the answers first part; the full
            # difference follows the table.
            diffs = diff_paths(a, b)
            where, x, y = diffs[0]
            where = "(whole answer)" if where == "." else where
            more = f" (+{len(diffs) - 1} more)" if len(diffs) > 1 else ""
            table.append((drv, name, "DIFF", where + more, short(x), short(y)))
            details.append((drv, name, diffs))

    cols = ["driver", "case", "result", "where", "direct", "keyshard"]
    widths = [max(len(str(r[i])) for r in table + [cols]) for i in range(len(cols))]
    line = lambda r: "| " + " | ".join(str(x).ljust(w) for x, w in zip(r, widths)) + " |"  # noqa: E731
    print(line(cols))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in table:
        print(line(r))
    ndiff = sum(1 for r in table if r[2] != "same")
    print(f"\n{len(table)} cases, {len(table) - ndiff} same, {ndiff} different")
    for n in notes:
        print(f"note: {n}")
    if details:
        print("\nDifferences (direct vs keyshard; only the differing parts):")
        for drv, name, diffs in details:
            print(f"\n## {drv} / {name}")
            for path, x, y in diffs:
                print(f"  {path}")
                print(f"    direct:   {json.dumps(x, ensure_ascii=False)}")
                print(f"    keyshard: {json.dumps(y, ensure_ascii=False)}")
    return 1 if ndiff else 0


if __name__ == "__main__":
    sys.exit(main())
