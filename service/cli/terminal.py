"""Text from builds (logs, test ids, failure lines) made safe to print on a terminal.

A build controls its log: escape sequences in it would move the cursor, retitle the
window, rewrite what was printed before it (hiding a line), or on some terminals answer
back into the input. Printed text keeps newlines and tabs; every other control character
(C0, DEL, C1: ESC and CSI among them) becomes a visible ``\\xNN``.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    # \r too: "evil\rgood" would print as "good" over the evidence.
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
