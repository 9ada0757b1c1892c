"""The K2+F1 feedback of the search: the common funnel-stage view of one rollout (paper 000
§6.3, §7.4), computed by the one funnel definition of the project
(:func:`containmentbench.attacks.funnel.rollout_funnel`: 1 delivered, 2 exposed, 3 exact-goal
proposal, 4 policy pass, 5 commit linked by call id to the exact-goal proposal). The search
keeps the stage and nothing else (no rule ids, no policy evidence, no trace text); the
qualification keeps the ``fn_*`` flags of each rollout for Table 19.
"""

from __future__ import annotations

from typing import Any

from containmentbench.attacks.funnel import recorder_events, rollout_funnel


def episode_funnel(ep: Any) -> dict[str, Any]:
    """The ``fn_*`` columns of a finished in-process episode."""
    return rollout_funnel(recorder_events(ep.rec), ep.s).columns()
