"""Microbenchmarks: collectives (NCCL or gloo) and GPU peer / host copies, run in child processes.

Only the worker-side modules (`worker`, `collectives`, `p2p`, `hostcopy`) import torch; everything
a parent process uses (`api`, `runner`, `spec`, `results`, `preflight`, `p2p_report`, `timing`)
does not, so the command line and the app stay light.
"""

import warnings

# The CPU build of torch does not depend on numpy and warns at import when it is missing;
# nothing here needs numpy (results travel as JSON), so the warning is only noise.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)
