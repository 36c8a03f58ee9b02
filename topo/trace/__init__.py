"""Analyses of profiler traces (read by :mod:`topo.formats.trace`): exposed communication per step, calls
below their links' speed, the rank everyone waited for; reading many traces in worker processes."""
