"""Runs a user's own Grinder 3 script (`esbperf run --script FILE`) as a step's workers (Jython 2.7).

The runner stages the user's script in the distribution folder and names it in
`esbperf.user.script`; this file runs it unchanged in its own namespace, then keeps only the
step's users working (users.py): the same start message reaches every agent, so the agents
together may start more threads than the step has users, and the extra ones stop at once."""
import sys

from java.io import File
from net.grinder.script.Grinder import grinder

import users

_script = grinder.properties.getProperty("esbperf.user.script")
if not _script:
    raise RuntimeError("esbperf.user.script is not set: user_script.py runs the script `esbperf run --script` staged")
# Relative paths resolve against the distribution folder, as grinder.script does.
_path = grinder.properties.resolveRelativeFile(File(_script)).getPath()
_folder = File(_path).getParent()
if _folder not in sys.path:
    sys.path.insert(0, _folder)   # the user's script may import modules staged beside it
_namespace = {"__name__": "__main__", "__file__": _path}
execfile(_path, _namespace)
if "TestRunner" not in _namespace:
    raise RuntimeError("%s defines no TestRunner class: not a Grinder 3 script" % _script)
_UserTestRunner = _namespace["TestRunner"]


class TestRunner:
    def __init__(self):
        self.runner = _UserTestRunner() if users.is_user(grinder) else None

    def __call__(self):
        if self.runner is None:
            grinder.stopThisWorkerThread()
        self.runner()

    def __del__(self):
        # Grinder calls a TestRunner's __del__ when its worker thread ends: the script's per-thread
        # clean-up (closing connections, writing a summary) must run as it would without us.
        cleanup = getattr(self.runner, "__del__", None)
        if cleanup is not None:
            cleanup()
