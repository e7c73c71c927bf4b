#!/usr/bin/env python3
"""Every relative link in the README and docs/ leads to a file of this
repository, and every #anchor to a heading of its page: a clone must not
carry a dead link (the README once linked a page outside the repository)."""

import os
import re
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def anchors(path):
    """GitHub's anchors of a page's headings."""
    out = set()
    for line in open(path, encoding="utf-8"):
        m = re.match(r"#+ (.*)", line)
        if m:
            a = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(a)
    return out


def main():
    pages = ["README.md"] + sorted(
        os.path.join("docs", f) for f in os.listdir(os.path.join(TOP, "docs")) if f.endswith(".md")
    )
    bad = []
    for page in pages:
        text = open(os.path.join(TOP, page), encoding="utf-8").read()
        here = os.path.dirname(page)
        for m in re.finditer(r"\]\(([^)\s]*)\)", text):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            path = os.path.normpath(os.path.join(TOP, here, file)) if file else os.path.join(TOP, page)
            if not path.startswith(TOP + os.sep) or not os.path.exists(path):
                bad.append(f"{page}: {target}: no such file in the repository")
            elif anchor and path.endswith(".md") and anchor not in anchors(path):
                bad.append(f"{page}: {target}: no heading #{anchor} there")
    for b in bad:
        print(b, file=sys.stderr)
    print(f"links: {len(pages)} pages, {len(bad)} dead")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
