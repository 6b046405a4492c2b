"""A run, from plan to results folder: start, resume and dry-run (runner), the checks before the
first step (preflight), one step in named phases (step), what can go wrong in one (problems), the
workers behind one face and as the console shows them (workers), the run's warm ones (pool), their
logs brought home (collect), the targets' warm-up (warmup), the monitors'
samples (monitors), the client's calibration (calibration), the live output (progress), the
wall-time estimate (estimate), what a run records of its machine (environment), a target checked
against the contract (verify), a user's own Grinder script (user_script), wrk (wrk).

Imports: core, results, services, testbed — never the analysis."""
