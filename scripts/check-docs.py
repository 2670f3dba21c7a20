#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks the project's documentation: every relative link in README.md,
docs/*.md and shaders/README.md resolves to a file in the repository (and a
heading there, for #anchors), nothing points outside the repository, and the
README stays a short page. Exits non-zero with one line per problem."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_README_LINES = 250
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading):
    # GitHub's anchors: lower case, punctuation dropped, spaces to hyphens.
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    out = set()
    in_code = False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            out.add(slug(line.lstrip("#")))
    return out


def main():
    files = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "shaders", "README.md")]
    docs = os.path.join(ROOT, "docs")
    files += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    problems = []
    for path in files:
        rel = os.path.relpath(path, ROOT)
        text = open(path, encoding="utf-8").read()
        for bad in ("../shared", "DESIGN.md", "STYLE.md"):
            if bad in text:
                problems.append(f"{rel}: mentions {bad}, which is not part of the repository")
        text_no_code = re.sub(r"```.*?```", "", text, flags=re.S)
        for target in LINK.findall(text_no_code):
            if re.match(r"^[a-z]+:", target):
                continue  # http(s), mailto: outside links are fine
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not dest.startswith(ROOT + os.sep):
                problems.append(f"{rel}: link {target} leaves the repository")
                continue
            if not os.path.exists(dest):
                problems.append(f"{rel}: link {target}: {os.path.relpath(dest, ROOT)} does not exist")
                continue
            if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                problems.append(f"{rel}: link {target}: no heading #{anchor} in {os.path.relpath(dest, ROOT)}")
    n = sum(1 for _ in open(os.path.join(ROOT, "README.md"), encoding="utf-8"))
    if n >= MAX_README_LINES:
        problems.append(f"README.md: {n} lines, expected fewer than {MAX_README_LINES} (move detail to docs/)")
    for p in problems:
        print(p)
    print(f"check-docs: {len(files)} files, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
