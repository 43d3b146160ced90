"""Resource and cost model: what a kernel occupies and how long it should take.

`resources` says what one block uses (shared memory, registers per role) and how many blocks
fit on an SM; `model` turns the primitives' cost facets into a time estimate with a named
bottleneck and a per-line share; `calibration` fits the model's coefficients to measured
runs.  Nothing here imports the simulator or a GPU runtime, so a prediction costs
milliseconds and runs anywhere.
"""
