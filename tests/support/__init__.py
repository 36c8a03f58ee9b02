"""Helpers and fakes the tests share: paths, command runners, fake NVML, sysfs and CUDA."""
