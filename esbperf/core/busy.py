"""When a process on the testbed is still busy warming: the workers' JIT time, and the lines above which
a neighbour of the target or the target's own compiler is busy. The run waits on them (esbperf/run/
gauge.py, runner.py, warmup.py) and the analysis names a step measured before them (analysis/validity.py),
so both read them here."""

# A new worker JVM compiles Jython, Grinder and the client for its first seconds under load, and runs
# them slowly meanwhile: on 2 cores about 10 s after the workers' first report (docs/grinder.md,
# "Warm workers"). A step measured sooner on a client whose cores the target's hosts share is named
# (the analysis's `worker-jit`); a run whose targets need no warm-up loads its new warm workers this
# long before its first step (runner._execute).
WORKER_JIT_S = 10


# The engines on the esb host that are not a step's target must be idle while it is measured: more
# than this, % of one core, is a neighbour still compiling after its warm-up (or loaded by someone
# else). The runner waits for the esb host to be this quiet after the targets' warm-up; the
# analysis names a step whose neighbours were busier on average in its window.
NEIGHBOURS_BUSY_PERCENT = 5.0
# A JVM target's JIT compiler is busy above this, % of one core on average: over its last 10 s for its
# warm-up to end (esbperf/run/gauge.py), over a step's window for the analysis (`compiler-busy`). Once
# the compiler of Camel, Synapse or Spring Integration had gone quiet, its 10-s means read at most
# 2.9 % (99th percentile 2.4 %, 819 windows: an odd recompile of a fifth of a second); while it still
# compiled, 10 % and more (5th percentile 16 %) (docs/benchmarks/warm-up.md).
COMPILER_BUSY_PERCENT = 5.0
