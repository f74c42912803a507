"""Errors a user can cause, and the one-line exit that reports them.

Stage scripts wrap their `main` in `exit_on_user_error`: a `UserError` becomes a single line on
stderr and exit status 2, never a traceback. Programming errors still raise normally. Command lines
are read by `ArgumentParser`, whose mistakes end the same way.
"""

from __future__ import annotations

import argparse
import errno
import functools
import logging
import sys
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., object])


class UserError(Exception):
    """Something the user can fix: a bad config, a missing file, corrupted data."""


class ConfigError(UserError):
    """A config file that does not parse or does not validate."""


class DataError(UserError):
    """Input data that is missing, corrupted or of the wrong shape."""


class HubUnavailable(UserError):
    """A Hugging Face Hub data set or model that cannot be reached from here."""


class TrainingDiverged(UserError):
    """The loss became NaN or infinite."""


# Operating-system errors the user fixes (space, permissions), not the code: one line, like a UserError.
# Outputs are written atomically (common/io.py), so such a failure leaves nothing half-written.
_SPACE, _PERMISSIONS = "free some space, or write elsewhere", "check the path's permissions"
USER_OS_ERRORS = {errno.ENOSPC: _SPACE, errno.EDQUOT: _SPACE, errno.EROFS: "write somewhere writable",
                  errno.EACCES: _PERMISSIONS, errno.EPERM: _PERMISSIONS,
                  errno.ENOTDIR: "a directory on the path is a file",
                  errno.EEXIST: "it stands where the output needs a directory",
                  errno.EISDIR: "a directory stands where the output file goes; remove it or write elsewhere"}


def out_of_memory(err: BaseException) -> str | None:
    """The allocator's own words when `err` is a failed allocation (torch's CUDA `OutOfMemoryError`,
    its CPU allocator's refusal, Python's `MemoryError`), else None. By name and message, so that
    this module loads without torch."""
    if isinstance(err, MemoryError):
        return "Python could not allocate memory"
    text = str(err)
    if type(err).__name__ == "OutOfMemoryError" or (isinstance(err, RuntimeError) and
                                                     "DefaultCPUAllocator: can't allocate memory" in text):
        words = text.split("DefaultCPUAllocator: ")[-1].split("\n")[0]
        return words.split(". Of the allocated memory")[0]  # CUDA's message goes on about its caching
    return None


def exit_on_user_error(main: F) -> F:
    """Run `main`; turn a `UserError`, a full disk or unwritable path, or a failed allocation into
    `error: <message>` on stderr and exit status 2."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except UserError as err:
            message = str(err)
        except OSError as err:
            if err.errno not in USER_OS_ERRORS:
                raise
            message = f"{err.filename or 'an output'}: {err.strerror}; {USER_OS_ERRORS[err.errno]}"
        except (RuntimeError, MemoryError) as err:
            if (words := out_of_memory(err)) is None:
                raise
            message = (f"out of memory ({words}): the settings ask for more memory than this machine or "
                       "device has; lower the batch size, the window or the model's size")
        logging.shutdown()
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2) from None

    return wrapper  # type: ignore[return-value]


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, reporting a bad command line as every other user error here: one line,
    `error: <what is wrong> (usage: <what is allowed>)`, exit status 2. argparse's own prints the
    usage first, wrapped over several lines, and the error after it."""

    def error(self, message: str):
        usage = " ".join(self.format_usage().split())
        self.exit(2, f"error: {message} ({usage})\n")
