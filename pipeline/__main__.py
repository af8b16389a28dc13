"""``python -m pipeline list`` and ``python -m pipeline describe NAME``: what can be swept."""

from __future__ import annotations

import sys

from pipeline.experiments.base import REQUIRED, registry


def _first_line(text: str) -> str:
    """The first paragraph of a docstring, on one line."""
    paragraph = (text or "").strip().split("\n\n")[0]
    return " ".join(ln.strip() for ln in paragraph.splitlines())


def describe(name: str) -> str:
    exp = registry()[name]
    lines = [f"{exp.name} (version {exp.version}{', stochastic: seeded per task' if exp.stochastic else ''})",
             _first_line(exp.doc), "", "parameters:"]
    for p in exp.params:
        typ = p.type if isinstance(p.type, str) else p.type.__name__
        default = "required" if p.default is REQUIRED else repr(p.default)
        domain = p.domain.describe() if p.domain else "any"
        lines.append(f"  {p.name:<22} {typ:<10} default {default:<12} {domain}"
                     + (f"  - {p.doc}" if p.doc else ""))
    if exp.checks:
        lines.append("limits checked before any task runs: "
                     + "; ".join(",".join(c.params) for c in exp.checks))
    lines += ["", "columns:"]
    lines += [f"  {n:<28} {t}" for n, t in exp.columns.items()]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    from pipeline.experiments import BROKEN

    if not argv or argv[0] not in ("list", "describe") or (argv[0] == "describe" and len(argv) != 2):
        print("usage: python -m pipeline list | describe NAME", file=sys.stderr)
        return 2
    experiments = registry()
    if argv[0] == "list":
        width = max(map(len, experiments))
        for name, exp in sorted(experiments.items()):
            print(f"{name:<{width}}  {_first_line(exp.doc)}")
        for module, error in BROKEN.items():
            print(f"(module {module} failed to import: {error})", file=sys.stderr)
        return 0
    if argv[1] not in experiments:
        print(f"unknown experiment '{argv[1]}'; available: {', '.join(sorted(experiments))}",
              file=sys.stderr)
        return 2
    print(describe(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
