"""Reads of a trace or a model: explain (and its derivations), survey and rollout, the atlas and
its detectors, the PE lens, why (a score split into its sources).
"""
