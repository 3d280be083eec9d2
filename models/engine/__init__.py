"""The engine: the maths of attention (attention; attend, the one attention function), the toy
(pipeline), the lazy n×n store (pairs), masks, the stage catalogue, traces, reductions to pixels.
"""
