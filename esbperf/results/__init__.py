"""The results folder, one definition for the run that writes it and the analysis that reads it:
its layout (layout), the workers' data logs read into histograms (datalog, histogram), the GC
windows of the service JVMs (gclog), and text files a killed process may have cut short (files).

Imports: core."""
