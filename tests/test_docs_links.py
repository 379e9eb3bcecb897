"""Every relative link of README.md and docs/*.md leads somewhere: the file exists and, with `#anchor`, the file
has a heading of that anchor (GitHub's rule: lower case, punctuation dropped, spaces to hyphens). And each part's
reference in docs/ is linked from the README."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    headings = re.findall(r"^#+ (.+)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def test_every_relative_link_resolves():
    broken = []
    for document in documents():
        for target in LINK.findall(FENCE.sub("", document.read_text())):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            linked = (document.parent / file_part).resolve() if file_part else document
            if not linked.exists():
                broken.append(f"{document.relative_to(ROOT)}: {target}: no such file")
            elif anchor and anchor not in anchors(linked):
                broken.append(f"{document.relative_to(ROOT)}: {target}: no heading #{anchor}")
    assert broken == []


def test_the_readme_links_every_reference_page():
    readme = (ROOT / "README.md").read_text()
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"](docs/{page.name})" in readme, f"README.md does not link docs/{page.name}"
