# -*- coding: utf-8 -*-
"""What a worker JVM loads before its first transaction, loaded once by `esbperf agent` into the
workers' class-data archive (esbperf/services/agent.py, `class_archive`): Jython itself, Grinder's
script API, the HTTP client and the scenario's own modules. A worker starts from the archive
about a quarter sooner, which on a client host of one core is most of a short step's start-up.
Never run by a worker: scenario.py is the workers' script."""
from java.io import File  # noqa: F401
from java.lang import String, System  # noqa: F401
from jarray import array  # noqa: F401
from net.grinder.script import Test  # noqa: F401
from net.grinder.script.Grinder import grinder  # noqa: F401
from org.python.core.util import StringUtil  # noqa: F401

from esbperf.client import CannedServer, Expected, KnownAnswers, Order, Requests, Schedule, StepLogs, Steps, User  # noqa: F401
import contract  # noqa: F401
import users  # noqa: F401
import json  # noqa: F401  (contract.py imports these where a scenario needs them)
import xml.etree.ElementTree  # noqa: F401
from threading import Lock  # noqa: F401
