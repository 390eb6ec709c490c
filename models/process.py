"""Ending a process that has talked to Temporal.

The SDK's core runtime (Rust, Tokio) keeps threads that can outlive the event loop; when the
interpreter finalizes while one of them still holds the GIL state, CPython aborts with
"PyGILState_Release: thread state ... must be current" and the process dies of SIGABRT instead of
exiting with its code (temporalio/sdk-python#300, open). A worker that ends with a clear message
must end with that message's exit code, so our entry points flush what they wrote and leave
without finalization.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn


def exit_process(code: int) -> NoReturn:
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or broken pipe: nothing more can be said on it
            pass
    os._exit(code)


def run_main(main: Callable[[], int | None]) -> NoReturn:
    """Run an entry point, then exit with its code as `sys.exit(main())` would, minus finalization."""
    try:
        result = main()
        code = 0 if result is None else int(result)
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # report as the interpreter would, then exit without finalizing
        traceback.print_exc()
        code = 1
    exit_process(code)
