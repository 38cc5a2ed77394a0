"""The click parameter type of the command line's text options.

On POSIX an argument is bytes; Python hands bytes that are not UTF-8 on as
surrogate escapes (PEP 383). Stored in SQLite or sent with httpx, such text
failed with a traceback (`UnicodeEncodeError`) instead of the one-line usage
error every other bad option gets. Paths are left alone: a file name may be
any bytes, and `click.Path` keeps them.
"""

from __future__ import annotations

from typing import Any

import click

from waypost.decoding import is_utf8


class UnicodeText(click.types.StringParamType):
    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = super().convert(value, param, ctx)
        if not is_utf8(text):
            self.fail("is not UTF-8 text (the shell passed other bytes)", param, ctx)
        return text


TEXT = UnicodeText()
