"""Attention Explorer's engine: torch and numpy, never Qt.

The way in from Python (a notebook, a script) is :mod:`models.api`: ``api.load("minilm")``,
``model.trace(sentence, layer)``, ``trace.stage("weights")``, ``trace.explain(stage, cell)``,
``api.toy(sentence, heads=2, ...)``, ``model.generate(prompt)``, ``model.atlas(texts)``; the command
lines (``main.py export``, ``explain``, ``generate``, ``atlas``) are built on it. See docs/api.md.
The other modules are the engine's parts and may change.
"""
