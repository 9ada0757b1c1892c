"""Every numeric flag of every verb is bounded (cli/argtypes.py): no bare ``type=int`` or
``type=float`` anywhere, and each converter refuses a value just outside its range."""

from __future__ import annotations

import argparse
import math

import pytest

from containmentbench.cli import argtypes as T
from containmentbench.cli.main import build_parser


def _flags(parser: argparse.ArgumentParser, prog: str = "containmentbench"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _flags(sub, f"{prog} {name}")
        elif action.option_strings or action.dest:
            yield prog, action


FLAGS = list(_flags(build_parser()))
NUMERIC = [(prog, a) for prog, a in FLAGS if hasattr(a.type, "bounds")]


def test_no_bare_numeric_type():
    bare = [f"{prog} {a.option_strings or a.dest}" for prog, a in FLAGS
            if a.type in (int, float)]
    assert not bare, bare
    assert len(NUMERIC) > 40  # rollout, adapters, audit, cim, analyze, show, ...


@pytest.mark.parametrize("prog,action", NUMERIC,
                         ids=[f"{p} {a.option_strings[0]}" for p, a in NUMERIC])
def test_every_numeric_flag_has_a_lower_bound_and_refuses_below_it(prog, action):
    (lo, hi), (open_lo, open_hi) = action.type.bounds, action.type.open
    assert lo is not None, (prog, action.option_strings)
    below = lo - 1 if isinstance(lo, int) else lo - 0.5
    with pytest.raises(argparse.ArgumentTypeError):
        action.type(str(below))
    if open_lo:
        with pytest.raises(argparse.ArgumentTypeError):
            action.type(str(lo))
    else:
        assert action.type(str(lo)) == lo
    if hi is not None and not math.isinf(hi):
        with pytest.raises(argparse.ArgumentTypeError):
            action.type(str(hi + 1))
        if open_hi:
            with pytest.raises(argparse.ArgumentTypeError):
                action.type(str(hi))
    if action.default is not None:  # the default itself is in range
        assert action.type(str(action.default)) == action.default


def test_converters():
    assert T.probability("0") == 0.0 and T.probability("1") == 1.0
    for bad in ("1.01", "-0.01"):
        with pytest.raises(argparse.ArgumentTypeError):
            T.probability(bad)
    for bad in ("nan", "inf", "x"):  # argparse words these "invalid float value"
        with pytest.raises(ValueError):
            T.probability(bad)
    frac = T.float_range(0.0, 1.0, open_lo=True, open_hi=True)
    for bad in ("0", "1"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"\(0.0, 1.0\)"):
            frac(bad)
    assert frac("0.5") == 0.5
    with pytest.raises(argparse.ArgumentTypeError, match=r"\[0, 2147483647\]"):
        T.seed("-1")
    with pytest.raises(ValueError):
        T.positive_int("1.5")
