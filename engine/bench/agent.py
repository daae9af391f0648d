"""torchrun's agent, run as `python -m engine.bench.agent ARGS` with torchrun's own arguments: this calls
torch.distributed.run's main unchanged (rendezvous, starting and watching the workers, the failure report
the launcher reads), then ends the process without Python's teardown of torch, which costs about a CPU
second an agent, a tenth of a tiny CPU trial. Exit handlers still run; the exit code is torchrun's own:
0, or 1 when it raised (its report is printed, as Python prints an uncaught exception).

Imports torch (through torch.distributed.run); started by engine.bench.launcher and engine.recipe.verify.
"""

from __future__ import annotations

import os
import sys
import traceback

MODULE = "engine.bench.agent"  # what the agent's command line names (engine.bench.environment.guard_worker)


def command() -> list[str]:
    """The agent's command, before torchrun's arguments."""
    return [sys.executable, "-m", MODULE]


def main() -> int:
    from torch.distributed.run import main as torchrun

    try:
        torchrun()
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - torchrun's ChildFailedError carries its report; print it as Python would
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    from engine.bench.environment import end_worker

    end_worker(main())
