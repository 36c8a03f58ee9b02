"""Microbenchmarks: collectives (NCCL or gloo) and GPU peer / host copies, run in child processes.

Only the worker-side modules (`worker`, `collectives`, `p2p`, `hostcopy`) import torch; everything
a parent process uses (`api`, `runner`, `spec`, `results`, `preflight`, `p2p_report`, `timing`)
does not, so the command line and the app stay light.
"""
