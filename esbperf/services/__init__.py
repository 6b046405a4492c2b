"""What runs on the testbed's hosts, each with its `esbperf <command>`: the Grinder console and the
client of its control API (console), agents (agent), the echo back ends (echo), the engines under
test — the ESBs and the floors beside them, each a folder of esb-projects/ (esb) — nginx as the
benchmarks' reference (nginx), the host monitors and their samples (monitor), and the heap and GC
settings of the JVMs under test (jvm).

Imports: core."""
