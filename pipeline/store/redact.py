"""Secrets out of what the pipeline records and prints: ``scheme://user:password@host`` becomes
``scheme://user:***@host`` in every string of a manifest record (argv, config, errors), in
every line of a run log, and in everything the command line prints. Key and certificate
*paths* are not secrets and stay.

A path keeps the form once it went through :class:`pathlib.Path`, which folds ``//`` into
``/`` (``results_dir=/data/sftp://alice:pw@host/r`` is printed as ``.../sftp:/alice:...``), so
one or more slashes after the scheme are matched."""

from __future__ import annotations

import logging
import os
import re
from typing import Any

# scheme:/[/]user:password@  (user and password without '/', '@' or whitespace). The scheme
# is the whole run of scheme characters before ':/' (a digit first, too: "1tcp://" was
# redacted from its "t"): tried from every letter of a long run, each try scanning to the
# run's end, the match took quadratic time (a 2 MB error held up the manifest for minutes).
_USERINFO = re.compile(r"(?<![A-Za-z0-9+.\-])(?P<scheme>[A-Za-z0-9+.\-]+:/+)"
                       r"(?P<user>[^/@:\s]*):(?P<pw>[^/@\s]+)@")


def redact(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@`` replaced by ``***``."""
    if "@" not in text:  # the common case, at the cost of one scan
        return text
    return _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)


def redact_secrets(value: Any) -> Any:
    """A copy of ``value`` (nested dicts, lists, strings) with :func:`redact` applied to every
    string, keys included."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_secrets(k): redact_secrets(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_secrets(v) for v in value)
    return value


class RedactingFormatter(logging.Formatter):
    """A log formatter whose every formatted line (message, arguments, traceback) is redacted."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class RedactingStream:
    """A text stream that redacts what is written through it, delegating everything else
    (``isatty``, ``fileno``, ``flush``, ``encoding``...) to the stream it wraps. The command
    line installs it over ``sys.stdout``/``sys.stderr`` while it runs, so no message, warning
    or third-party print can echo a password from the command line. A secret split across two
    ``write`` calls would pass; ``print`` and the logging handlers write whole lines."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            self._stream.write(redact(text) if isinstance(text, str) else text)
        except BrokenPipeError:
            self._reader_gone()
        return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._reader_gone()

    def _reader_gone(self) -> None:
        """Whoever read this stream went away (`run.py ... | tee log` whose tee ended with the
        terminal, `| head`): the next progress line raised BrokenPipeError and crashed the
        sweep (exit 1, 'crashed'). The sweep goes on, its run log has every line; the rest of
        the output goes to /dev/null, so neither later writes nor the flush at exit fail."""
        to_devnull(self._stream)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def to_devnull(stream) -> None:
    """Send the rest of ``stream``'s output to /dev/null (its reader went away), so that
    neither later writes nor the flush at exit raise BrokenPipeError again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no file descriptor (a test's StringIO)
        pass
