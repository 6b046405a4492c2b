from esbperf.cli import main

if __name__ == "__main__":   # not when a spawned process imports it (analysis/graphs.py draws in several)
    main()
