"""An independent reading of the GPU's energy while a night runs (issue 34's check): a
process of its own that reads NVML's total-energy counter (mJ) at 5 Hz and writes
`wall_time mJ` lines until killed. `energy_check.py` compares dualpath's stored joules with
this counter's difference over the same window.

usage (device): python bench/gpu/energy_probe.py OUT.txt [GPU_INDEX]
"""
import sys
import time

import pynvml

pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
with open(sys.argv[1], "w", buffering=1) as f:
    while True:
        f.write(f"{time.time():.3f} {pynvml.nvmlDeviceGetTotalEnergyConsumption(h)}\n")
        time.sleep(0.2)
