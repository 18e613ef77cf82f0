"""The doctor's one door into the engine: what studies a model rather than runs it.

The operator scan and traces (`opscan`, `optrace`, `opcoverage`, `meta_model`, the torch_npu
registry `npu_registry`), the micro-benchmarks (`microbench`, `bench_timing`, `bench_math`) and
the memory plan (`plan`). The runtime (engine/) never imports this package.
"""
