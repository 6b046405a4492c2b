"""Which worker threads are a step's users, for any script the runner starts (Jython 2.7).

Every agent gets the same start message, so each runs processes x threads of its own and all
agents together may run more threads than the step has users (3 users on 2 agents: 2 x 2). A
thread whose place among all threads of the step is `users` or beyond stops at once."""


def user_index(grinder):
    """This thread's place among all threads of all agents and processes of the step."""
    properties = grinder.properties
    processes = properties.getInt("grinder.processes", 1)
    threads = properties.getInt("grinder.threads", 1)
    process = grinder.processNumber - grinder.firstProcessNumber
    return (max(grinder.agentNumber, 0) * processes + process) * threads + grinder.threadNumber


def is_user(grinder):
    """True when this thread is one of the step's `esbperf.users` (0 or unset: every thread is)."""
    users = grinder.properties.getInt("esbperf.users", 0)
    return users <= 0 or user_index(grinder) < users
