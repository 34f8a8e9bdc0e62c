"""pytest plugin: every `eqx.filter_jit` a test calls is `af.filter_jit`.

Load it with `-p swap_filter_jit` (this folder on PYTHONPATH). It points the
attribute `equinox.filter_jit` at `arrayfield.filter_jit` once pytest is
configured, before any test module is imported, so `eqx.filter_jit(f)` and
`from equinox import filter_jit` in a test both get arrayfield's. Equinox's own
modules keep calling their own `filter_jit` (they import it from `equinox._jit`),
as they would in a user's program. Set ARRAYFIELD_SWAP=0 for the baseline run.

Like `swap_module.py`, it imports nothing from equinox at import time: jaxtyping's
pytest plugin must install its import hook first.
"""

import os
import sys

import pytest


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    del config
    if os.environ.get("ARRAYFIELD_SWAP", "1") == "0":
        return
    import equinox

    import arrayfield
    from arrayfield import _layouts

    equinox.filter_jit = arrayfield.filter_jit
    sys.stderr.write("[swap_filter_jit] equinox.filter_jit is arrayfield.filter_jit\n")

    # Count the programs af.filter_jit compiles on its own path (not passed on to
    # equinox's), so a run shows that the swap did more than forward every call.
    compile_program = _layouts.Layout.add

    def counted(self, *args, **kwargs):
        _programs[0] += 1
        return compile_program(self, *args, **kwargs)

    _layouts.Layout.add = counted


_programs = [0]


def pytest_terminal_summary(terminalreporter):
    if os.environ.get("ARRAYFIELD_SWAP", "1") != "0":
        terminalreporter.write_line(
            f"[swap_filter_jit] programs af.filter_jit compiled itself: {_programs[0]}"
        )
