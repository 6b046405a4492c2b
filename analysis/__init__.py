"""Analysis: Grinder data logs and monitor samples -> statistics, summary.csv, graphs, report (issue 6)."""
