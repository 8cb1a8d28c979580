"""Where the suite's time goes, recorded per test (a pytest plugin, loaded by
conftest.py).

Each test's report gets three properties, which pytest's --junitxml writes
beside the test (and tools/suite_time.py sums up):
  setup_s     wall seconds of the test's setup (its fixtures, built or reused);
  call_s      wall seconds of the test body;
  child_cpu_s CPU seconds (user + system) of the child processes this test
              started and waited for: TensorFlow imported in a fresh
              interpreter, a script run as a user runs it, a worker of a
              cluster;
and `kinds`, the test's markers that say what kind of work it does (slow,
hypothesis, subprocess, release_independent). Recording costs two clock reads and two
getrusage calls per phase.
"""

import time

import pytest

try:
    import resource
except ImportError:  # Windows: no child accounting; the figure stays 0
    resource = None


_KINDS = ("slow", "subprocess", "release_independent")


def _children_cpu():
    if resource is None:
        return 0.0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(item, phase):
    start, children = time.perf_counter(), _children_cpu()
    yield
    spent = getattr(item, "_suite_timing", {})
    spent[phase + "_s"] = spent.get(phase + "_s", 0.0) + time.perf_counter() - start
    spent["child_cpu_s"] = spent.get("child_cpu_s", 0.0) + _children_cpu() - children
    item._suite_timing = spent  # pylint: disable=protected-access


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield from _timed(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _timed(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    yield from _timed(item, "teardown")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "teardown":
        report = outcome.get_result()
        kinds = [mark.name for mark in item.iter_markers() if mark.name in _KINDS]
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            kinds.append("hypothesis")
        report.user_properties.append(("kinds", ",".join(sorted(set(kinds)))))
        for key, value in sorted(getattr(item, "_suite_timing", {}).items()):
            report.user_properties.append((key, "%.3f" % value))
