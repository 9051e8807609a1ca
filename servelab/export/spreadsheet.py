"""Text cells a spreadsheet would run or misread, made inert before a table is written: a
cell that starts with = + - @ (or a tab or carriage return) is a formula to Excel, LibreOffice
and Google Sheets, so it gets a leading apostrophe, as OWASP's "CSV Injection" page advises;
NUL and the other control characters, and the bidirectional overrides that make a cell read
differently from what it holds (U+202A-U+202E, U+2066-U+2069), are written as \\u escapes.
Numbers are cells of their own type and are left as they are."""

from __future__ import annotations

import re

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
HIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u202a-\u202e\u2066-\u2069]")


def safe_text(value):
    if not isinstance(value, str):
        return value
    value = HIDDEN.sub(lambda m: f"\\u{ord(m.group()):04x}", value)
    return "'" + value if value.startswith(FORMULA_START) else value


def spreadsheet_safe(table):
    """A copy of `table` (a DataFrame) whose text cells are inert."""
    out = table.copy()
    for column in out.columns:
        if out[column].dtype == object:
            out[column] = out[column].map(safe_text)
    return out
