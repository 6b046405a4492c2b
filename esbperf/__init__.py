"""esbperf: performance tests for Enterprise Service Buses (see README.md)."""

__version__ = "0.1.0"
