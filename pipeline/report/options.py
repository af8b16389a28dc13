"""The report's top-level config keys, checked before anything is read or written."""

from __future__ import annotations

from pipeline.report.style import STYLES

MAX_SIG_DIGITS = 17  # a float64 round-trips with 17


class ReportOptionError(ValueError):
    pass


def check_report_options(style, sig_digits) -> None:
    """``report_style`` is one of :data:`pipeline.report.style.STYLES`; ``report_sig_digits``
    an integer from 1 to 17."""
    if style not in STYLES:
        raise ReportOptionError(f"report_style must be one of {', '.join(STYLES)}, got {style!r}")
    if isinstance(sig_digits, bool) or not isinstance(sig_digits, int) \
            or not 1 <= sig_digits <= MAX_SIG_DIGITS:
        raise ReportOptionError(f"report_sig_digits must be an integer from 1 to "
                                f"{MAX_SIG_DIGITS}, got {sig_digits!r}")
