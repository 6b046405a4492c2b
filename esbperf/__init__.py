"""esbperf: performance tests for Enterprise Service Buses (see README.md).

The package in layers; each imports only those below it (tests/test_layout.py checks it):

    cli/        the command line: the command table, and the commands that put layers together
                (`run`, which writes the report after a run; `demo`)
    run/        a run, from plan to results folder: preflight, steps, workers, logs brought home,
                monitors, calibration, resume
    testbed/    the testbed's hosts, emulated or real, reached over ssh; starting every service
    services/   what runs on the hosts: console (and its control API client), agents, echo
                back ends, ESBs, monitors, the JVM settings they share
    results/    the results folder as the run writes it and the analysis reads it: layout, data
                logs, histograms, GC windows, cut-short files
    core/       what every layer shares: errors, the checkout and its build, configuration,
                roles, testbeds, plans, payloads, the scenario contract, processes

The analysis (analysis/, importable as esbperf.analysis) reads results/ and core/ only: the run
never imports it, it never imports the run."""

__version__ = "0.1.0"
