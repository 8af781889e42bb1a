"""Price files' text as exported: UTF-8 checked and named plainly, or decoded from the
encoding the export was written in (a Korean Excel/HTS export's CP949) into a UTF-8 copy
that DuckDB reads."""

from __future__ import annotations

from pathlib import Path

from dualpath.errors import DataError


def is_utf8(encoding: str) -> bool:
    return encoding.lower().replace("_", "-") in ("utf-8", "utf8")


def as_utf8(path: Path, encoding: str) -> Path:
    """The file decoded from `encoding` into a UTF-8 temporary copy (DuckDB reads UTF-8)."""
    import codecs
    import tempfile

    try:
        codecs.lookup(encoding)
    except LookupError:
        raise DataError(f"encoding {encoding!r} is not a known codec; use e.g. 'cp949', "
                        "'euc-kr' or 'utf-8'") from None
    data = path.read_bytes()
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as e:
        raise DataError(f"price file {path} is not {encoding} text (bad byte at offset "
                        f"{e.start}); set [market] encoding (or --encoding) to the file's "
                        "encoding") from None
    if not text.strip():
        raise DataError(f"price file {path} is empty; it needs a header line and price rows")
    fd, name = tempfile.mkstemp(suffix=".csv", prefix="dualpath-prices-")
    with open(fd, "w", encoding="utf-8", newline="") as f:
        f.write(text.lstrip("\ufeff"))
    return Path(name)


def check_text(path: Path) -> None:
    """An empty or non-UTF-8 CSV named plainly (DuckDB's own error says neither)."""
    head = path.open("rb").read(1 << 20)
    if not head.strip():
        raise DataError(f"price file {path} is empty; it needs a header line and price rows")
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 4:          # not just a character cut at the 1 MB mark
            raise DataError(f"price file {path} is not UTF-8 text (bad byte at offset "
                            f"{e.start}); Korean Excel/HTS exports are often CP949: set [market] encoding = "
                            "'cp949' (or --encoding cp949), save it as "
                            "'CSV UTF-8' or convert it (iconv -f cp949 -t utf-8)") from None
