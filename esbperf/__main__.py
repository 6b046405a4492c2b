from esbperf.cli import main

main()
