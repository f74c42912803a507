"""Errors a user can cause, and the one-line exit that reports them.

Stage scripts wrap their `main` in `exit_on_user_error`: a `UserError` becomes a single line on
stderr and exit status 2, never a traceback. Programming errors still raise normally.
"""

from __future__ import annotations

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


def exit_on_user_error(main: F) -> F:
    """Run `main`; turn a `UserError`, or a full disk or unwritable path, into `error: <message>` on
    stderr and exit status 2."""

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
        logging.shutdown()
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2) from None

    return wrapper  # type: ignore[return-value]
