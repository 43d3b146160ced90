"""Failure mining and promotion: the part of the harness that learns.

Agent runs record every failure with a normalized signature (`cake_agents/signature.py`,
`gaps.py` for what the evaluator's own loop leaves out).  `clusters.py` groups them across
runs and picks the prime candidates, late failures a static rule could have caught;
`promote.py` turns one signature into a plugin item (rule, tactic, primitive or
calibration) with its failing kernels as regression tests (`package.py`, `templates.py`,
`pattern.py` for what a promoted rule matches, `draft.py` for a model-drafted body);
`ledger.py` records every such change and where it fired since.  docs/mining.md has
the whole loop.
"""
