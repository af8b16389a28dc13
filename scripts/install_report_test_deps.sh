#!/usr/bin/env bash
# Installs the system parts the report tests drive for real (issue 16): pdflatex with booktabs and
# siunitx (Debian texlive-latex-base/-recommended/-science), headless Chromium for the HTML report,
# and poppler-utils' pdffonts for the font check. Idempotent: does nothing when all are present.
# Without root (a developer's own machine) it only says what is missing; those tests then skip
# with the reason.
set -euo pipefail
PACKAGES=(texlive-latex-base texlive-latex-recommended texlive-science chromium poppler-utils)
missing=()
for pkg in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "install_report_test_deps: no apt-get; install ${missing[*]} by hand (LaTeX/browser tests skip)" >&2
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
        echo "install_report_test_deps: not root; missing ${missing[*]} (LaTeX/browser tests skip)" >&2
        exit 0
    fi
fi
echo "install_report_test_deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# the package lists may be absent on a fresh machine: update once, then install. A failure
# (no network) is reported, not fatal: the tests then skip, or fail under CI with the reason.
if ! { $SUDO apt-get update -qq && \
       $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }; then
    echo "install_report_test_deps: apt-get failed; ${missing[*]} missing" >&2
fi
