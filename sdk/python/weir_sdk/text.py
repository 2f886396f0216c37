"""Text as Rust's standard library treats it, for operators whose output
must match a Rust build byte for byte."""

#: Unicode `White_Space`, what Rust's `str::trim` strips. Python's
#: `str.strip()` strips U+001C..U+001F too.
WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def trim(s):
    """`s` without leading and trailing whitespace, as Rust's `str::trim`."""
    return s.strip(WHITESPACE)
