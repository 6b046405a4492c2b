"""What runs on the testbed's hosts, each with its `esbperf <command>`: the Grinder console and the
client of its control API (console), agents (agent), the echo back ends (echo), the ESBs under test
and the floors beside them (esb, floors, nginx), the host monitors and their samples (monitor), and
the heap and GC settings of the JVMs under test (jvm).

Imports: core."""
