"""The pure core of linkscope: snapshot model, readers, samples, cost model, layouts and checks.

Imports nothing that touches hardware or draws (no torch, pynvml, textual or rich).
"""
