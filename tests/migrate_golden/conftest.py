# The files here are codemod inputs and expected outputs, not tests or modules
# to import (some import packages that are not installed, on purpose).
collect_ignore_glob = ["*.py"]
