"""The order in which pytest-xdist hands out the test modules (wired in by tests/conftest.py).

`--dist loadscope` keeps each module on one worker and, with `--no-loadscope-reorder`, hands the
modules out in collection order, which `Schedule` sets:
1. modules with a `waits` test (most of its time spent waiting on a server, LoadGen's paced
   queries or a timeout): they wait while the quick tier, lint and the other worker use the
   cores, instead of leaving both cores half idle at the end of the run;
2. then the longest first, by the seconds tests/durations.json recorded for each module (a
   module it does not know first of all: it may be long), so that the run ends on short modules
   on both workers instead of one long module on one of them.
A module's own order is kept. `pytest --record-durations` writes each module's seconds (its
tests' setup, call and teardown) into the durations file after the run, keeping the modules the
run left out; `make durations` records the whole suite.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import pytest

WAITS = "waits"
RECORD = "--record-durations"
DURATIONS_FILE = "--durations-file"
DURATIONS = Path(__file__).with_name("durations.json")


def add_options(parser: pytest.Parser) -> None:
    parser.addoption(
        RECORD,
        action="store_true",
        help="write each module's seconds into the durations file after the run",
    )
    parser.addoption(
        DURATIONS_FILE,
        type=Path,
        default=DURATIONS,
        help="the modules' recorded seconds, which order the run (default: tests/durations.json)",
    )


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def read_durations(path: Path) -> dict[str, float]:
    return json.loads(path.read_text()) if path.exists() else {}


def schedule(items: list[pytest.Item], durations: dict[str, float]) -> None:
    """Order `items` by module: `waits` modules first, then the longest recorded first."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(module_of(item.nodeid), []).append(item)

    def waits_first_then_longest(tests: list[pytest.Item]) -> tuple[bool, float, int]:
        waits = any(test.get_closest_marker(WAITS) is not None for test in tests)
        seconds = durations.get(module_of(tests[0].nodeid), math.inf)
        return (not waits, -seconds, -len(tests))

    ordered = sorted(modules.values(), key=waits_first_then_longest)
    items[:] = [item for tests in ordered for item in tests]


class Schedule:
    """The plugin: orders the collected tests after every other collection hook (`-m` and
    --quick have chosen them), and with --record-durations sums each module's seconds from the
    test reports (under pytest-xdist the controller receives every worker's) and writes them."""

    def __init__(self, config: pytest.Config) -> None:
        self.path: Path = config.getoption(DURATIONS_FILE)
        self.record = bool(config.getoption(RECORD)) and not hasattr(config, "workerinput")
        self.seconds: defaultdict[str, float] = defaultdict(float)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        schedule(items, read_durations(self.path))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.record:
            self.seconds[module_of(report.nodeid)] += report.duration

    def pytest_sessionfinish(self) -> None:
        if self.record and self.seconds:
            recorded = read_durations(self.path)
            recorded.update({module: round(s, 1) for module, s in self.seconds.items()})
            self.path.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
