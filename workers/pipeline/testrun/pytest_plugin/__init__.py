"""The pytest plugin ootci injects into a backend's test run.

The plugin module lives alone in this directory so the test step can put exactly this
directory on the backend's PYTHONPATH and load it with ``-p ootci_pytest_plugin``.
"""

from pathlib import Path

PLUGIN_DIR = Path(__file__).resolve().parent
PLUGIN_MODULE = "ootci_pytest_plugin"
