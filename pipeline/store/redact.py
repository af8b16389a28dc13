"""Secrets out of what the pipeline records: ``scheme://user:password@host`` becomes
``scheme://user:***@host`` in every string of a manifest record (argv, config, errors) and in
logged addresses. Key and certificate *paths* are not secrets and stay."""

from __future__ import annotations

import re
from typing import Any

# scheme://user:password@  (user and password without '/', '@' or whitespace)
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^/@:\s]*):(?P<pw>[^/@\s]+)@")


def redact(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@`` replaced by ``***``."""
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
