#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every source, build and script file in the repository starts with an SPDX
licence identifier (after a #! line): `spdx.py` checks, `spdx.py --fix`
adds the missing ones. Data, docs and fuzz seeds are not sources."""
import pathlib
import subprocess
import sys

TAG = "SPDX-License-Identifier: MIT"
SLASH = {".cpp", ".h", ".cu", ".cuh", ".comp", ".glsl", ".cpp.in"}
BLOCK = {".c", ".map", ".h.in"}  # C and linker scripts: /* */ comments
HASH = {".cmake", ".cmake.in", ".pc.in", ".sh", ".py", ".supp", ".txt"}
NAMES = {"Makefile"}


def comment(path):
    name = path.name
    if name in NAMES:
        return f"# {TAG}"
    for ext in sorted(SLASH | BLOCK | HASH, key=len, reverse=True):
        if name.endswith(ext):
            if ext == ".txt" and name != "CMakeLists.txt":
                return None
            if ext in SLASH:
                return f"// {TAG}"
            if ext in BLOCK:
                return f"/* {TAG} */"
            return f"# {TAG}"
    return None


def main():
    fix = "--fix" in sys.argv[1:]
    root = pathlib.Path(__file__).resolve().parent.parent
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                           cwd=root, capture_output=True, text=True, check=True).stdout.split()
    missing = []
    checked = 0
    for f in files:
        p = root / f
        line = comment(p)
        if line is None or f.startswith("fuzz/corpus/") or not p.is_file():
            continue
        checked += 1
        text = p.read_text()
        lines = text.split("\n")
        at = 1 if lines and lines[0].startswith("#!") else 0
        if any(TAG in l for l in lines[at:at + 2]):
            continue
        missing.append(f)
        if fix:
            lines.insert(at, line)
            p.write_text("\n".join(lines))
    if missing and not fix:
        print(f"spdx: {len(missing)} of {checked} files lack '{TAG}' in their first lines "
              f"(scripts/spdx.py --fix adds it):")
        for f in missing:
            print("  " + f)
        return 1
    print(f"spdx: {checked} files carry '{TAG}'" + (f" ({len(missing)} added)" if fix and missing else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
