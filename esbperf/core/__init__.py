"""What every layer shares, and nothing else: the one error type (errors), the checkout and its
Maven build (project), configuration files (config), the roles of a testbed's hosts (roles), the
testbed description (topology), sweep plans (plan), payload files (payloads), the scenario
contract as CPython sees it (scenarios), and starting and stopping processes (procs).

Imports: nothing of esbperf outside core."""
