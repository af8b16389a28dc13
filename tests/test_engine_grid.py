"""Grid expansion, task identity and validation (engine level, no cluster)."""

import hashlib
import itertools

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.overrides import apply_node_overrides, split_node_overrides
from pipeline.validation import ConfigError
from pipeline.engine.axis_values import expand_value
from pipeline.engine.grid import LAZY_AXIS, Grid
from pipeline.engine.task_ids import seed_of, task_id_of
from pipeline.experiments.base import (Choice, Experiment, Interval, Param, ParamError,
                                       PointCheck, REQUIRED)


def toy(version=1, checks=(), required=False):
    return Experiment(
        name="toy", version=version,
        params=[
            Param("eps", float, 1.0, Interval(0, None, lo_closed=False)),
            Param("k", int, 1, Interval(1, 1000)),
            Param("graph", str, "path", Choice("path", "cycle")),
            Param("flag", bool, False),
            Param("weights", "float_list", [0.5], Interval(0, None)),
            Param("n", int, REQUIRED if required else 4, Interval(1, None)),
        ],
        columns={"out": pa.float64()},
        run=lambda p, s: {"out": p["eps"] * p["k"]},
        checks=checks,
    )


def points(grid):
    return [grid.point(i) for i in range(grid.total)]


def test_cartesian_product_order_last_axis_fastest():
    g = Grid(toy(), {"eps": [0.1, 0.2], "k": [1, 2, 3]}, {})
    assert g.total == 6
    got = [(p["eps"], p["k"]) for p in points(g)]
    assert got == list(itertools.product([0.1, 0.2], [1, 2, 3]))
    assert all(p["graph"] == "path" and p["n"] == 4 for p in points(g))


def test_zip_group_varies_together_and_multiplies_with_other_axes():
    g = Grid(toy(), {"graph": ["path", "cycle"], "zip": [{"k": [1, 2, 3], "n": [5, 6, 7]}]}, {})
    assert g.total == 6
    assert {(p["k"], p["n"]) for p in points(g)} == {(1, 5), (2, 6), (3, 7)}
    # which list is which: "([1, 2])" left the user to count
    with pytest.raises(ParamError, match=r"differ in length \(k has 2, n has 1 value\(s\)\)"):
        Grid(toy(), {"zip": [{"k": [1, 2], "n": [5]}]}, {})


@pytest.mark.parametrize("spec,expected", [
    ({"linspace": [0.0, 1.0, 5]}, [0.0, 0.25, 0.5, 0.75, 1.0]),
    ({"logspace": [-2, 0, 3]}, [0.01, 0.1, 1.0]),
    ({"range": [1, 10, 3]}, [1, 4, 7]),
    ("linspace(0, 1, 3)", [0.0, 0.5, 1.0]),
    ("range(3)", [0, 1, 2]),
    ({"range": {"start": 2, "stop": 5}}, [2, 3, 4]),
])
def test_range_helpers(spec, expected):
    assert np.allclose(expand_value(spec, "x", "toy"), expected, rtol=1e-15)


def test_params_fixed_and_grid_wins_over_params():
    g = Grid(toy(), {"k": [2, 3]}, {"k": 99, "eps": 0.5})
    assert [p["k"] for p in points(g)] == [2, 3]
    assert all(p["eps"] == 0.5 for p in points(g))


def test_scalar_grid_value_is_a_single_point_and_list_params():
    g = Grid(toy(), {"k": 7, "weights": [[0.1, 0.2], [0.3]]}, {})
    assert g.total == 2
    assert [p["weights"] for p in points(g)] == [[0.1, 0.2], [0.3]]
    g = Grid(toy(), {}, {"weights": [0.1, 0.2]})  # a flat list in params is one value
    assert g.point(0)["weights"] == [0.1, 0.2]


@pytest.mark.parametrize("grid,params,param,fragment", [
    ({"bogus": [1]}, {}, "bogus", "unknown parameter"),
    ({}, {"bogus": 1}, "bogus", "unknown parameter"),
    ({"eps": [0.0, 1.0]}, {}, "eps", "(0, inf)"),
    ({"graph": ["tree"]}, {}, "graph", "one of {path, cycle}"),
    ({"k": [1.5]}, {}, "k", "cannot read 1.5 as int"),
    ({"weights": [[0.1, -1.0]]}, {}, "weights", "each element must be"),
    ({"eps": {"linspace": [0, 1]}}, {}, "eps", "exactly 3 arguments"),
    ({"eps": [float("inf")]}, {}, "eps", "(0, inf)"),  # an open side admits finite values only
    ({"eps": [float("nan")]}, {}, "eps", "(0, inf)"),
    ({"k": [2**63]}, {}, "k", "outside the int64 range"),
])
def test_bad_values_name_the_parameter_and_allowed_values(grid, params, param, fragment):
    with pytest.raises(ParamError) as info:
        Grid(toy(), grid, params)
    assert info.value.param == param
    assert fragment in str(info.value)


def test_required_parameter_must_be_given():
    with pytest.raises(ParamError, match="required"):
        Grid(toy(required=True), {}, {})
    assert Grid(toy(required=True), {"n": [3]}, {}).point(0)["n"] == 3


def test_point_checks_run_once_per_distinct_combination():
    calls = []

    def limit(v):
        calls.append(dict(v))
        return "k * n must be <= 100" if v["k"] * v["n"] > 100 else None

    exp = toy(checks=[PointCheck(("k", "n"), limit)])
    Grid(exp, {"eps": list(np.linspace(0.1, 1, 50)), "k": [1, 2], "n": [3, 4, 5]}, {})
    assert len(calls) == 6  # 2 x 3 combinations, not 300 points
    with pytest.raises(ParamError, match=r"k \* n must be <= 100 \(at k=30, n=4\)"):
        Grid(exp, {"k": [1, 30], "n": [3, 4]}, {})


def test_task_id_is_canonical_and_stable():
    a = Grid(toy(), {"k": [3]}, {"eps": 0.5})
    b = Grid(toy(), {"eps": [0.5]}, {"k": 3, "graph": "path", "n": 4})  # defaults given explicitly
    assert a.task_id(0) == b.task_id(0)
    # a frozen value: changing the hashing scheme silently would orphan every stored result
    assert a.canonical(0) == ('{"experiment": "toy", "version": 1,"params":{"eps":0.5,'
                              '"flag":false,"graph":"path","k":3,"n":4,"weights":[0.5]}}')
    assert a.task_id(0) == task_id_of(a.canonical(0)) == "520564488289f9743f2403a0"  # = sha256sum | cut -c1-24
    assert Grid(toy(version=2), {"k": [3]}, {"eps": 0.5}).task_id(0) != a.task_id(0)
    assert Grid(toy(), {"k": [3]}, {"eps": 0.5000001}).task_id(0) != a.task_id(0)
    ids = [Grid(toy(), {"eps": list(np.linspace(0.1, 1, 30)), "k": [1, 2, 3]}, {}).task_id(i)
           for i in range(90)]
    assert len(set(ids)) == 90


def test_seed_is_a_pure_function_of_the_task_id():
    g = Grid(toy(), {"k": [1, 2]}, {})
    s0, s1 = seed_of(g.task_id(0)), seed_of(g.task_id(1))
    assert s0 == seed_of(g.task_id(0)) and s0 != s1 and 0 <= s0 < 2**63


def test_lazy_indexing_of_a_huge_grid():
    g = Grid(toy(), {"eps": {"linspace": [0.1, 1, 1000]}, "k": {"range": [1, 1001]},
                     "n": {"range": [1, 11]}}, {})
    assert g.total == 10**7
    last = g.point(10**7 - 1)
    assert (last["eps"], last["k"], last["n"]) == (1.0, 1000, 10)
    assert g.point(12345)["n"] == 12345 % 10 + 1


def test_cli_grid_overrides_replace_and_add():
    rest, actions = split_node_overrides(
        ["experiment=toy", "grid.eps=[0.1,0.5]", "grid.k={range:[1,4]}", "params.n=9",
         "~grid.graph", "cluster.n_workers=2"])
    assert rest == ["experiment=toy", "cluster.n_workers=2"]
    conf = {"grid": {"k": {"linspace": [0, 1, 3]}, "graph": ["path"]}, "params": {}}
    apply_node_overrides(conf, actions)
    assert conf == {"grid": {"eps": [0.1, 0.5], "k": {"range": [1, 4]}}, "params": {"n": 9}}
    with pytest.raises(ConfigError, match="grid has no 'graph' to remove; its keys: k, eps"):
        apply_node_overrides(conf, actions)  # removed already
    with pytest.raises(ConfigError, match="as a list"):
        split_node_overrides(["grid.eps=0.1,0.5"])


def test_a_long_flat_list_parses_as_hydra_parses_it_whole():
    """A list of n values took Hydra's parser n^2 steps (39 s for 20,000). Long flat lists are
    now parsed a chunk at a time by the same grammar. Oracle: Hydra's parse of the whole list,
    over plain tokens of every kind its grammar types (ints, floats, exponents, inf, nan,
    bools, null, words, spaced words, underscores)."""
    import math

    from hydra.core.override_parser.overrides_parser import OverridesParser

    from pipeline import overrides

    tokens = ["7", "-3", "+4", "1_000", "0.25", "-1e-3", "2E5", "inf", "-inf", "nan", "true",
              "False", "null", "abc", "a b", " padded ", "x1.y", "1.", ".5", "0x1F", "é", "a-b",
              "2026-12-06", "10:30", "a=b", "?", "%", "*", "~", "/p/q", "@x", "#x", "a&b"]
    parser = OverridesParser.create()

    def hydra_takes(token):
        try:
            parser.parse_overrides([f"grid.v=[{token}]"])
            return True
        except Exception:
            return False

    refused = [t for t in tokens if not hydra_takes(t)]
    assert 0 < len(refused) < len(tokens) // 4, refused  # ('%', '#x'...: the grammar's own)
    for token in refused:  # refused anywhere in a long list too, as a ConfigError
        with pytest.raises(ConfigError, match="cannot parse"):
            split_node_overrides(["grid.v=[" + ",".join(["1"] * 600 + [token]) + "]"])
    rng = np.random.default_rng(3)
    elements = [str(t) for t in rng.choice([t for t in tokens if t not in refused],
                                           size=3 * overrides.LIST_CHUNK + 17)]
    raw = "[" + ",".join(elements) + "]"
    assert overrides._flat_list_chunks(raw) is not None  # the chunked path is the one tested
    whole = parser.parse_overrides([f"grid.v={raw}"])[0].value()
    _, actions = split_node_overrides([f"grid.v={raw}"])
    chunked = actions[0][2]
    assert len(chunked) == len(whole) == len(elements)
    for a, b in zip(chunked, whole):
        assert type(a) is type(b) and (a == b or (isinstance(a, float) and math.isnan(a)
                                                   and math.isnan(b))), (a, b)
    # what the chunked path leaves to Hydra: nested values, quotes, an empty element
    for raw in ["[" + ",".join(["1"] * 300) + ",[2,3]]", "[" + ",".join(["'a,b'"] * 300) + "]",
                "[" + ",".join(["1"] * 300) + ",]", "[1,2]"]:
        assert overrides._flat_list_chunks(raw) is None
    with pytest.raises(ConfigError, match="cannot parse"):
        split_node_overrides(["grid.v=[" + ",".join(["1"] * 300) + ",]"])
    _, actions = split_node_overrides(["grid.v=[" + ",".join(["'a,b'"] * 300) + "]"])
    assert actions[0][2] == ["a,b"] * 300


def test_every_shipped_experiment_config_is_a_valid_grid():
    """Each conf/experiment/NAME.yaml names a registered experiment and expands, through the
    engine's own Grid, into typed points that pass every declared limit."""
    from pathlib import Path

    import yaml

    from pipeline.experiments.base import registry

    conf = Path(__file__).resolve().parents[1] / "conf" / "experiment"
    experiments = registry()
    names = sorted(p.stem for p in conf.glob("*.yaml"))
    assert set(names) == set(experiments)  # no config without experiment, and vice versa
    for name in names:
        cfg = yaml.safe_load((conf / f"{name}.yaml").read_text()) or {}
        grid = Grid(experiments[name], cfg.get("grid") or {}, cfg.get("params") or {})
        assert 1 <= grid.total <= 100_000, (name, grid.total)  # a default sweep, not a night
        for i in grid.sample_indices(3):
            point = grid.point(i)
            assert set(point) == {p.name for p in experiments[name].params}
            assert experiments[name].resolve(point) == point  # typed, in domain, within limits


def test_optional_parameter_accepts_null_and_values():
    exp = Experiment("opt", 1, [Param("t", float, None, Interval(0, 1)), Param("k", int, 1)],
                     {"out": pa.float64()}, lambda p, s: {})
    assert Grid(exp, {}, {"t": None}).point(0)["t"] is None
    assert Grid(exp, {"t": [None, 0.5]}, {}).total == 2
    with pytest.raises(ParamError, match="allowed: a value in"):
        Grid(exp, {"t": [2.0]}, {})
    with pytest.raises(ParamError, match="cannot read None as int"):
        Grid(exp, {}, {"k": None})  # a parameter with a real default stays required-typed


def wide():
    """Every scalar kind a grid axis holds, including values whose hash fragment is special
    (-0.0 folds to 0.0; inf and nan are quoted; strings are JSON-escaped)."""
    return Experiment(
        name="wide", version=3,
        params=[Param("a", float, 1.0), Param("b", int, 0), Param("s", str, "x"),
                Param("flag", bool, False), Param("w", "float_list", [0.5]),
                Param("c", float, 2.0)],
        columns={"out": pa.float64()}, run=lambda p, s: {"out": 0.0})


@settings(max_examples=60, deadline=None)
@given(
    floats=st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1, max_size=4),
    ints=st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=3),
    strings=st.lists(st.text(max_size=4), min_size=1, max_size=2),
    flags=st.lists(st.booleans(), min_size=1, max_size=2),
    data=st.data())
def test_batch_columns_are_point_and_task_id_for_every_value_kind(floats, ints, strings, flags, data):
    grid = {"a": floats, "b": ints, "s": strings, "flag": flags}
    if data.draw(st.booleans()):
        grid["zip"] = [{"w": [[0.1], [0.2, -0.0]], "c": [float("inf"), -1.5]}]
    g = Grid(wide(), grid, {})
    indices = data.draw(st.lists(st.integers(0, g.total - 1), min_size=1, max_size=20))
    columns, ids = g.batch_columns(indices)
    assert ids == [g.task_id(i) for i in indices]
    for k, i in enumerate(indices):
        expected = g.point(i)
        got = {name: columns[name][k] for name in g.param_names}
        assert _fragment_all(got) == _fragment_all(expected)  # nan != nan: compare by fragment
    _check_batch_values(g, indices)


@given(st.lists(st.one_of(st.floats(width=64), st.integers(), st.booleans(), st.text(max_size=5),
                          st.none(), st.lists(st.floats(width=64), max_size=3))))
def test_fragments_of_is_fragment_of_each(values):
    from pipeline.engine.grid import _fragment, _fragments_of

    assert _fragments_of(values) == [_fragment(v) for v in values]


def _fragment_all(point):
    from pipeline.engine.grid import _fragment

    return {k: _fragment(v) for k, v in point.items()}


def test_batch_columns_of_lazy_axes_match_point_and_task_id():
    # axes longer than LAZY_AXIS: a range, a float array (with -0.0 and inf), and a zip group
    big = LAZY_AXIS + 5
    floats = np.linspace(-1.0, 1.0, big)
    floats[[3, 7]] = [-0.0, np.inf]
    g = Grid(wide(), {"b": {"range": [-7, 3 * big - 7, 3]},
                      "zip": [{"a": floats.tolist(), "s": [f"p{i}" for i in range(big)],
                               "flag": [i % 2 == 0 for i in range(big)]}]},
             {"c": 0.25})
    lazy = [axis for axis in g.axes if axis._fragments is None]
    assert len(lazy) == 2  # both axes decode lazily here
    indices = np.array([0, 1, 3, 7, big * big - 1, 12_345_678, 7 * big + 3])
    columns, ids = g.batch_columns(indices)
    assert ids == [g.task_id(int(i)) for i in indices]
    for k, i in enumerate(indices):
        assert {n: columns[n][k] for n in g.param_names} == g.point(int(i))
    _check_batch_values(g, indices)


@pytest.mark.parametrize("grid, params, indices", [
    ({"eps": [0.1, 0.2], "k": [1, 2, 3]}, {}, range(6)),
    ({"graph": ["path", "cycle"], "zip": [{"k": [1, 2, 3], "n": [5, 6, 7]}]}, {"weights": [1, 2]},
     [5, 0, 3, 3]),
    ({"weights": [[0.5], [0.1, 0.2]], "flag": [True, False]}, {"eps": 2.0}, range(4)),
    # axes longer than LAZY_AXIS keep their values and fragments lazy
    ({"eps": {"linspace": [0.1, 1, 1000]}, "k": {"range": [1, 1001]},
      "n": {"range": [1, 200_001]}}, {}, np.array([0, 1, 199_999, 10**6, 2 * 10**11 - 1])),
    ({}, {"k": 7}, [0]),
])
def test_batch_identities_match_point_and_task_id(grid, params, indices):
    """Grid.identities (the worker's one-pass batch decoding) is point() and task_id()."""
    g = Grid(toy(), grid, params)
    points, ids = g.identities(indices)
    assert points == [g.point(int(i)) for i in indices]
    assert ids == [g.task_id(int(i)) for i in indices]
    assert [list(p) for p in points] == [g.param_names] * len(points)  # same key order
    points[0]["weights"].append(9.0)  # list values are copies, never shared with the grid
    assert g.point(int(indices[0]))["weights"] != points[0]["weights"]
    with pytest.raises(IndexError):
        g.identities([g.total])
    _check_batch_values(g, indices)


def _check_batch_values(g, indices):
    """Grid.batch_values (the driver's columns for a batch's table) holds point()'s values;
    the long range and float axes come as numpy arrays."""
    values = g.batch_values(indices)
    for k, i in enumerate(indices):
        got = {n: values[n][k].item() if isinstance(values[n][k], np.generic) else values[n][k]
               for n in g.param_names}
        assert _fragment_all(got) == _fragment_all(g.point(int(i)))  # -0.0, nan by fragment
        assert all(type(got[n]) is type(v) for n, v in g.point(int(i)).items())
    for axis in g.axes:
        if axis.single and axis._typed is None and isinstance(axis.values, (range, np.ndarray)):
            assert isinstance(values[axis.names[0]], np.ndarray)
    with pytest.raises(IndexError):
        g.batch_values([g.total])


def test_run_batch_rows_are_the_grids_points_ids_and_seeds():
    """run_batch builds each point from the grid's fixed values and axis columns and hashes
    its id inside the loop: every row must still be point(i), task_id(i) and seed_of(it),
    with failed points and multi-row points in the same batch."""
    from pipeline.engine.batch import run_batch
    from pipeline.experiments.base import get_experiment
    g = Grid(get_experiment("calibration"), {"x": [3, 4, 6], "fail_every": [0, 2]},
             {"rows": 2, "scale": 0.5})
    indices = [5, 0, 3, 2]
    df = run_batch(g, indices)[0].to_pandas()
    expected = []
    for i in indices:
        point, tid = g.point(i), g.task_id(i)
        fails = point["fail_every"] and point["x"] % point["fail_every"] == 0
        for r in range(1 if fails else 2):
            expected.append((point["x"], point["fail_every"], tid, seed_of(tid),
                             "failed" if fails else "ok", r,
                             None if fails else point["x"] * 0.5 + r))
    got = [(r.x, r.fail_every, r.task_id, r.seed, r.status, r.row_index,
            None if r.value != r.value else r.value) for r in df.itertuples()]
    assert got == expected
    assert (df.scale == 0.5).all() and (df.rows == 2).all()  # the fixed values, one Arrow call
    assert df.error[df.status == "failed"].str.startswith("ValueError").all()
    assert df.error[df.status == "ok"].isna().all()
    assert (df.finished_at >= df.started_at).all() and (df.elapsed_s >= 0).all()


def test_a_point_that_returns_after_task_timeout_is_failed_with_its_time():
    """task_timeout fails every point whose own measured time is over the limit, not only
    those the worker's watcher catches still running (it polls every 0.1 s, then waits a
    second before ending the process): a sweep of 0.2 s points at a 0.1 s limit kept 17 of
    20 as ok. A point that raised keeps its own error; points under the limit are ok."""
    from pipeline.engine.batch import run_batch
    from pipeline.experiments.base import get_experiment
    g = Grid(get_experiment("calibration"),
             {"x": [0, 1, 2, 4], "work_us": [1000.0, 120_000.0]},
             {"work_mode": "sleep", "fail_every": 3})
    df = run_batch(g, list(range(g.total)), task_timeout=0.06)[0].to_pandas()
    assert (df[df.work_us > 1000].elapsed_s > 0.06).all()  # a sleep never returns early
    over = df.elapsed_s > 0.06  # (a 1 ms point too, on a machine that stalled it that long)
    raised = df.x == 0
    assert (df.status == np.where(over | raised, "failed", "ok")).all(), df[["x", "status"]]
    assert df[raised].error.str.startswith("ValueError").all()  # raised: its own error
    for row in df[over & ~raised].itertuples():
        assert row.error == (f"TaskTimeout: point ran longer than task_timeout=0.06 s (it "
                             f"returned after {row.elapsed_s:.3g} s; its result is not kept)")
    assert df[df.status == "ok"].value.notna().all() and df[df.status == "failed"].value.isna().all()


def test_digest_gives_the_task_id_and_seed():
    """The worker hashes each point once, to a digest, and sends its first TASK_ID_BYTES: the
    ids the driver writes in one Arrow call and the seeds it cuts from them (and the seeds the
    worker cuts from the whole digest) are task_id_of and seed_of of the canonical string."""
    from pipeline.engine.batch_table import task_id_array
    from pipeline.engine.task_ids import TASK_ID_BYTES, digests_of, seeds_of_digests, seeds_of_ids

    g = Grid(toy(), {"eps": [0.1, 0.2, 0.3], "k": [1, 2]}, {})
    texts = [g.canonical(i) for i in range(g.total)]
    digests = digests_of(texts)
    ids = b"".join(d[:TASK_ID_BYTES] for d in digests)
    assert task_id_array(ids).to_pylist() == [task_id_of(t) for t in texts]
    assert seeds_of_digests(digests) == [seed_of(task_id_of(t)) for t in texts]
    assert seeds_of_ids(ids).tolist() == [seed_of(task_id_of(t)) for t in texts]
    # the top bit of a digest set: the seed is still the non-negative leading 63 bits
    top = bytes([0xff] * TASK_ID_BYTES)
    assert seeds_of_ids(top).tolist() == [2**63 - 1] == [seed_of(top.hex())]
    # the id is the sha256 itself: pinned, as the store's rows from earlier runs depend on it
    assert task_id_of(texts[0]) == hashlib.sha256(texts[0].encode()).hexdigest()[:24]
    assert task_id_array(b"").to_pylist() == [] and seeds_of_ids(b"").tolist() == []


@pytest.mark.parametrize("sizes", [[3, 700, 5], [1, 1, 1_998]])
def test_run_batch_over_many_strips_and_batch_sizes(sizes):
    """Batches longer than a strip, with two varying axes (the general canonical strings)
    and fixed values whose Arrow columns are cached per grid and sliced to each batch's
    length, batch after batch of other lengths."""
    from pipeline.engine.batch import STRIP, run_batch
    from pipeline.experiments.base import get_experiment

    g = Grid(get_experiment("calibration"), {"x": {"range": [0, 1_000]}, "scale": [0.5, 2.0]},
             {"work_us": 0.0, "rows": 1, "work_mode": "sleep"})
    assert max(sizes) > 2 * STRIP
    start = 0
    for n in sizes:
        indices = list(range(start, start + n))
        df = run_batch(g, indices)[0].to_pandas()
        points = [g.point(i) for i in indices]
        assert df.task_id.tolist() == [g.task_id(i) for i in indices]
        assert df.seed.tolist() == [seed_of(g.task_id(i)) for i in indices]
        assert df.value.tolist() == [p["x"] * p["scale"] for p in points]
        assert (df.work_us == 0.0).all() and (df.work_mode == "sleep").all()
        assert (df.rows == 1).all() and (df.row_index == 0).all() and (df.status == "ok").all()
        assert df.error.isna().all() and len(df) == n
        start += n


@pytest.mark.parametrize("spec,values,dropped", [
    ({"linspace": [1, 1, 5]}, [1.0], 4),                    # every value the same
    ({"logspace": [0, 1e-17, 4]}, [1.0], 3),                # values that round together
    ({"linspace": [-0.0, 0.0, 3]}, [0.0], 2),               # -0.0 and 0.0 are one point
    ({"linspace": [2.0, 1.0, 3]}, [2.0, 1.5, 1.0], 0),      # decreasing, no repeat: kept
])
def test_range_helper_repeats_are_one_point(spec, values, dropped):
    """A linspace/logspace that repeats a value is one point per value, as a list is: each
    repeat was the same task id, run and stored once per repeat (5 rows of one task)."""
    e = Experiment(name="toy_f", version=1, params=[Param("x", float, 1.0, Interval(-1, 10))],
                   columns={"out": pa.float64()}, run=lambda p, s: {"out": 0.0})
    g = Grid(e, {"x": spec}, {})
    assert [g.point(i)["x"] for i in range(g.total)] == values
    ids = g.batch_columns(range(g.total))[1]
    assert len(set(ids)) == len(ids) == g.total
    assert g.duplicates_dropped == ({"x": dropped} if dropped else {})


@pytest.mark.parametrize("n", [10**14, 10**17])
def test_dry_run_samples_of_a_grid_beyond_float_and_int64_precision(n):
    """A dry run has no size limit: its sample points were cut with a float linspace, which
    rounded 10^17 - 1 up to 10^17 (IndexError on a 10^17-point grid) and could not cast a
    10^20-point grid's last index at all (a numpy traceback)."""
    g = Grid(toy(), {"n": {"range": [16, n + 16]}, "k": {"range": [1, 1001]}}, {})
    assert g.total == n * 1000
    picks = g.sample_indices(5)
    assert picks[0] == 0 and picks[-1] == g.total - 1 and len(picks) == 5
    assert (g.point(picks[-1])["n"], g.point(picks[-1])["k"]) == (n + 15, 1000)
    assert all(len(g.task_id(i)) == 24 for i in picks)


def test_range_arguments_beyond_float_precision_are_integers():
    """An integer range argument above 2^53 was refused as "range arguments must be integers"
    (its float rounds to another integer); a fraction still is refused."""
    g = Grid(toy(), {"n": {"range": [2**53 + 1, 2**53 + 4]}}, {})
    assert [g.point(i)["n"] for i in range(g.total)] == [2**53 + 1, 2**53 + 2, 2**53 + 3]
    assert Grid(toy(), {"n": "range(9007199254740993, 9007199254740995)"}, {}).total == 2
    for bad in ([1, 2.5], [1.5, 3]):
        with pytest.raises(ParamError, match="range arguments must be integers"):
            Grid(toy(), {"n": {"range": bad}}, {})


def test_range_of_a_float_parameter_is_compact_and_keeps_its_ids():
    """A range helper on a float parameter was coerced value by value into Python floats and
    their id fragments (a 10^8-point axis: minutes and GiBs before a dry run answered); it
    is held as a float array like a linspace, with the same points and task ids as a list."""
    import tracemalloc

    small = Grid(toy(), {"eps": {"range": [1, 2000, 7]}}, {})
    listed = Grid(toy(), {"eps": [float(v) for v in range(1, 2000, 7)]}, {})
    assert small.total == listed.total == len(range(1, 2000, 7))
    assert small.batch_columns(range(small.total)) == listed.batch_columns(range(listed.total))
    assert points(small) == points(listed)
    n = 10**6
    tracemalloc.start()
    try:
        g = Grid(toy(), {"eps": {"range": [1, n + 1]}}, {})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert g.total == n and g.point(n - 1)["eps"] == float(n)
    assert peak < 40 * n, peak  # a few float64 arrays, not a Python object per value


def test_point_checks_on_a_list_parameter_axis():
    """A check involving a list-typed parameter that is a grid axis (composition_hetero's
    eps_list) ended in 'TypeError: unhashable type: list' instead of validating the grid."""
    calls = []

    def limit(v):
        calls.append(dict(v))
        return "weights may hold at most k values" if len(v["weights"]) > v["k"] else None

    exp = toy(checks=[PointCheck(("weights", "k"), limit)])
    g = Grid(exp, {"weights": [[0.5], [0.5, 1.0], [0.5]], "k": [2, 3]}, {})
    assert g.total == 4 and g.duplicates_dropped == {"weights": 1}
    assert len(calls) == 4  # 2 distinct lists x 2 values of k
    with pytest.raises(ParamError, match=r"at most k values \(at weights=\[0.5, 1.0\], k=1\)"):
        Grid(exp, {"weights": [[0.5], [0.5, 1.0]], "k": [1]}, {})
    with pytest.raises(ParamError, match="at most k values"):  # in a zip group too
        Grid(exp, {"zip": [{"weights": [[0.5], [0.5, 1.0]], "k": [1, 1]}]}, {})


@pytest.mark.parametrize("spec,message", [
    ({"range": {"start": 5}}, "missing: stop"),  # ran range(5): 0..4
    ({"range": {"start": 2, "step": 3}}, "missing: stop"),  # ran range(2, 3)
    ({"range": {"start": 0, "stop": 10, "stpe": 2}}, "unknown: stpe"),  # ran range(0, 10)
    ({"linspace": {"start": 0, "stop": 1, "n": 5}}, "unknown: n; missing: num"),
])
def test_named_range_helper_arguments_keep_their_meaning(spec, message):
    """A helper's arguments given by name were taken in order, skipping the missing and
    unknown ones: {range: {start: 5}} silently swept 0..4 and a misspelt step was ignored."""
    with pytest.raises(ParamError, match=message):
        Grid(toy(), {"k": spec}, {})
    assert list(expand_value({"range": {"stop": 3}}, "k", "toy")) == [0, 1, 2]
    g = Grid(toy(), {"n": {"range": {"start": 2, "stop": 9, "step": 3}}}, {})
    assert [p["n"] for p in points(g)] == [2, 5, 8]


@pytest.mark.parametrize("spec", [{"linspace": [0, float("inf"), 3]},
                                  {"linspace": [float("nan"), 1, 3]},
                                  {"logspace": [float("-inf"), 0, 3]}])
def test_space_helpers_need_finite_ends(spec):
    """linspace(0, inf, 3) is [0, nan, inf]: a parameter without a domain (calibration's
    scale) swept NaN as a value nobody asked for, and one with a domain was refused for
    'value nan', a value not in the command."""
    e = Experiment(name="toy_free", version=1, params=[Param("x", float, 1.0, None)],
                   columns={"out": pa.float64()}, run=lambda p, s: {"out": 0.0})
    with pytest.raises(ParamError, match="start and stop must be finite numbers"):
        Grid(e, {"x": spec}, {})


def test_an_int_domain_bound_above_2_53_is_compared_exactly():
    """Interval.contains compared ints as floats: above 2^53 a value next to a bound rounded
    onto it, so a plug-in's Interval(0, 2**62) admitted 2**62 + 1 (and an open bound 2**60
    refused 2**60 + 1), also at the end of a range axis."""
    seed = Param("s", int, 0, Interval(0, 2**62))
    assert seed.coerce(2**62) == 2**62
    with pytest.raises(ParamError, match=r"value 4611686018427387905 not allowed"):
        seed.coerce(2**62 + 1)
    above = Interval(2**60, None, lo_closed=False)
    assert above.contains(2**60 + 1) and not above.contains(2**60)
    assert above.contains(np.int64(2**60 + 1))
    plugin = Experiment(name="plugin", version=1, params=[seed], columns={"out": pa.int64()},
                        run=lambda p, s: {"out": p["s"]})
    assert Grid(plugin, {"s": {"range": [2**62 - 3, 2**62 + 1]}}, {}).total == 4
    with pytest.raises(ParamError, match="parameter 's'"):
        Grid(plugin, {"s": {"range": [2**62 - 3, 2**62 + 2]}}, {})
    # floats as before: NaN and an unbounded infinity are outside
    assert not Interval(0, None).contains(float("nan"))
    assert not Interval(0, None).contains(float("inf"))
    assert Interval(0, 5.5).contains(5) and not Interval(0, 5.5).contains(6)


def _experiment_modules_loaded() -> list[str]:
    import sys

    return sorted(m for m in sys.modules if m.startswith(("pipeline.experiments.",
                                                          "pipeline.kernels.")))


@pytest.mark.timeout(120)
def test_a_worker_imports_the_experiment_of_its_grid_not_every_family():
    """A grid travels as its spec and the worker rebuilds it; importing every family to find
    the experiment cost each worker process about a second of CPU (scipy, networkx...) at
    every sweep's start and at every worker that joined or restarted. The worker imports the
    experiment's own module (and its kernels) only, and its rows are the same."""
    import pickle

    from distributed import Client, LocalCluster

    from pipeline.engine.batch import run_batch
    from pipeline.experiments.base import get_experiment

    grid = Grid(get_experiment("calibration"), {"x": [3, 4]}, {"work_us": 0.0})
    assert grid.__reduce__()[1][-1] == "pipeline.experiments.calibration"
    assert pickle.loads(pickle.dumps(grid)).task_id(1) == grid.task_id(1)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        table, _ = client.submit(run_batch, grid, [0, 1]).result(timeout=60)
        (loaded,) = client.run(_experiment_modules_loaded).values()
    assert table.column("x").to_pylist() == [3, 4]
    assert table.column("task_id").to_pylist() == [grid.task_id(0), grid.task_id(1)]
    families = {m.split(".")[2] for m in loaded if m.startswith("pipeline.experiments.")}
    assert {f for f in families if not f.startswith("_")} == {"base", "calibration"}, loaded
    assert not any(m.startswith("pipeline.kernels.") for m in loaded), loaded


def test_logspace_beyond_the_float_range_is_refused():
    """logspace(-400, 400, 3) gave [0.0, 1.0, inf], exit 0: a parameter without a domain
    (calibration's scale) swept 0 and inf, values nobody asked for. Within range: kept."""
    e = Experiment(name="toy_free", version=1, params=[Param("x", float, 1.0, None)],
                   columns={"out": pa.float64()}, run=lambda p, s: {"out": 0.0})
    with pytest.raises(ParamError, match=r"bad logspace helper \[-400, 400, 3\]: 2 of its "
                                         r"values are 10\^x beyond a float's range"):
        Grid(e, {"x": {"logspace": [-400, 400, 3]}}, {})
    g = Grid(e, {"x": {"logspace": [-300, 300, 3]}}, {})
    assert [p["x"] for p in points(g)] == [1e-300, 1.0, 1e300]
