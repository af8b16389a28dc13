"""Graphs of datasets shared by the finite-mechanism families (``low_influence``, ``leakage``):
the family names, their size parameters and the cross-parameter check.

Lives in the experiment layer (below the families that use it) so that no family imports
another.
"""

from __future__ import annotations

from pipeline.experiments.base import Choice, Interval, Param

GRAPHS = ("K2", "path", "cycle", "complete", "star", "hypercube", "hamming", "petersen", "random_regular")

GRAPH_PARAMS = [
    Param("graph", str, "K2", Choice(*GRAPHS), "dataset graph family"),
    Param("n", int, 4, Interval(2, 4096), "vertices of path/cycle/complete/star/random_regular "
          "(cycle needs n >= 3)"),
    Param("u", int, 3, Interval(1, 20), "hypercube dimension / Hamming individuals"),
    Param("v", int, 3, Interval(2, 64), "Hamming values per individual"),
    Param("degree", int, 3, Interval(1, 64), "degree of random_regular"),
]


def graph_check(p: dict) -> str | None:
    """Cross-parameter constraints of the graph families (a PointCheck on graph, n, degree)."""
    if p["graph"] == "cycle" and p["n"] < 3:
        return "graph=cycle needs n >= 3"
    if p["graph"] == "random_regular" and ((p["n"] * p["degree"]) % 2 or p["degree"] >= p["n"]):
        return "graph=random_regular needs degree < n and n*degree even"
    return None
