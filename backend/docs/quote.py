"""Expand code quotes in the integration pages.

A page quotes code by marker instead of copying it, so it cannot drift:

    <!-- quote: csrc/runtime/OpenRegGuard.cpp#guard -->

stands for the lines between `// [guard]` and `// [/guard]` in that file
(`# [marker]` / `# [/marker]` in Python, YAML and CMake files).

    python docs/quote.py docs/guard.md      # print the page with quotes expanded
    python docs/quote.py --check            # fail if any page names a missing marker
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

BACKEND = Path(__file__).resolve().parent.parent
HASH_COMMENTS = (".py", ".yaml", "CMakeLists.txt", ".cmake")
QUOTE = re.compile(r"<!-- quote: (?P<path>[^#\s]+)#(?P<marker>[\w-]+) -->")


def extract(path: str, marker: str) -> str:
    lines = (BACKEND / path).read_text().splitlines()
    comment = "#" if path.endswith(HASH_COMMENTS) else "//"
    try:
        start = lines.index(next(line for line in lines if line.strip() == f"{comment} [{marker}]"))
        end = lines.index(next(line for line in lines if line.strip() == f"{comment} [/{marker}]"))
    except StopIteration:
        raise KeyError(f"{path}: marker [{marker}] not found") from None
    return "\n".join(lines[start + 1 : end])


def render(page: Path) -> str:
    def expand(m: re.Match[str]) -> str:
        lang = {".py": "python", ".yaml": "yaml", ".txt": "cmake", ".cmake": "cmake"}.get(Path(m["path"]).suffix, "cpp")
        comment = "#" if m["path"].endswith(HASH_COMMENTS) else "//"
        return f"```{lang}\n{comment} {m['path']}\n{extract(m['path'], m['marker'])}\n```"

    return QUOTE.sub(expand, page.read_text())


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--check":
        missing = 0
        for page in sorted(Path(__file__).parent.glob("*.md")):
            for m in QUOTE.finditer(page.read_text()):
                try:
                    extract(m["path"], m["marker"])
                except (KeyError, FileNotFoundError) as e:
                    print(f"{page.name}: {e}")
                    missing += 1
        return 1 if missing else 0
    for name in argv:
        print(render(Path(name)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
