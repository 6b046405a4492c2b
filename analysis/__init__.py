"""The analysis: results folders -> statistics, summary.csv, graphs, report.html, comparisons and the
regression gate. Imports: core and results (never the run, the services or the testbed)."""
