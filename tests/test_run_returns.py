"""What an experiment's run() may return (one dict, or a list of dicts: the rows of its point),
and the error a point is stored failed with when it returns anything else: it names what
run() returned, not what the engine tripped over while reading it."""

from collections import OrderedDict

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from pipeline.engine.batch import _outputs, run_batch
from pipeline.engine.run_returns import as_rows
from pipeline.engine.grid import Grid
from pipeline.experiments.base import Experiment, Param

COLUMNS = ["value", "label"]


def _message(out) -> str:
    """The error a point that returned ``out`` is stored with (``_outputs`` maps the points'
    returns to rows through ``as_rows``)."""
    outputs, counts, statuses, errors = _outputs([out], COLUMNS)
    assert statuses == ["failed"] and counts == [1]
    assert outputs == {"value": [None], "label": [None]}
    return errors[0]


@pytest.mark.parametrize("out,expected", [
    (None, "run() returned None: it must return a dict of output columns or a list of such "
           "dicts, one per row (a missing return?)"),
    (1.0, "run() returned a float (1.0): it must return a dict of output columns or a list "
          "of such dicts, one per row, e.g. {'value': 1.0}"),
    (3, "run() returned an int (3)"),
    (np.float64(2.5), "run() returned a float64 (2.5)"),
    ("abc", "run() returned a str ('abc')"),
    ((1.0, "a"), "run() returned a tuple ((1.0, 'a')): it must return a dict of output columns "
                 "or a list of such dicts, one per row; name each value, e.g. "
                 "{'value': 1.0, 'label': 'a'}"),
    (pd.DataFrame({"value": [1.0, 2.0], "label": ["a", "b"]}),
     "run() returned a DataFrame: it must return a dict of output columns or a list of such "
     "dicts, one per row; return df.to_dict('records')"),
    (pd.Series({"value": 1.0}), "run() returned a Series"),
    (np.array([1.0, 2.0]), "run() returned a numpy array whose item 0 is a float64 (1.0), not a dict"),
    ([{"value": 1.0}, 2.0], "run() returned a list whose item 1 is a float (2.0), not a dict"),
    ([None], "run() returned a list whose item 0 is None, not a dict"),
    ([], "run() returned an empty list: every point must give at least one row"),
    ((row for row in []), "run() returned an empty generator: every point must give"),
])
def test_a_wrong_return_is_named_in_the_error(out, expected):
    message = _message(out)
    assert expected in message
    assert "batch.py" not in message  # the mistake is in the experiment, not the engine


def test_an_empty_list_says_why_a_point_needs_a_row():
    assert "so every resume would run it again" in _message([])


@pytest.mark.parametrize("out,rows", [
    ({"value": 1.0}, [{"value": 1.0}]),
    ({}, [{}]),  # a row of nulls, said explicitly
    (OrderedDict(value=1.0), [OrderedDict(value=1.0)]),
    ([{"value": 1.0}, {"value": 2.0}], [{"value": 1.0}, {"value": 2.0}]),
    (({"value": 1.0}, {"value": 2.0}), [{"value": 1.0}, {"value": 2.0}]),
    ((dict(value=float(i)) for i in range(2)), [{"value": 0.0}, {"value": 1.0}]),
])
def test_rows_that_are_accepted(out, rows):
    assert list(as_rows(out)) == rows


def test_a_point_whose_run_returns_none_is_stored_failed_and_the_batch_goes_on():
    def run_forgetful(p, seed):
        if p["i"] != 1:
            return {"value": float(p["i"])}
        {"value": 1.0}  # noqa: B018 (the forgotten return)

    exp = Experiment("forgetful", 1, [Param("i", int, 0)], {"value": pa.float64()},
                     run_forgetful)
    df = run_batch(Grid(exp, {"i": [0, 1, 2]}, {}), range(3))[0].to_pandas()
    assert list(df.status) == ["ok", "failed", "ok"]
    assert list(df.value.fillna(-1)) == [0.0, -1, 2.0]
    assert df.error[1] == ("RunReturnError: run_forgetful() returned None: it must return a "
                           "dict of output columns or a list of such dicts, one per row (a "
                           "missing return?)")
    assert df.error[[0, 2]].isna().all()


def test_an_undeclared_output_column_names_the_declared_ones():
    """A row with a key that is no declared column failed its task with only the bad key named
    ("undeclared output column(s) ['w']"); the declared columns are listed beside it, so the
    typo ('w' for 'v') shows."""
    outputs, counts, statuses, errors = _outputs([{"v": 1.0}, {"w": 2.0}], ["v", "log_v"])
    assert statuses == ["ok", "failed"]
    assert errors[1].startswith(
        "KeyError: \"undeclared output column(s) ['w']; declared: v, log_v\" [")  # then [file:line]
    assert outputs["v"] == [1.0, None]
