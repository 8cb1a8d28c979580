"""tools/suite_time.py: the table of where the suite's time goes, from a
JUnit report with the properties tests/suite_timing.py records."""

import pytest

pytestmark = pytest.mark.release_independent

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="0" skipped="0" tests="4" time="30.0">
<testcase classname="tests.docs.test_doc_pages" name="test_page[frozen.md]" time="12.0">
 <properties><property name="call_s" value="11.5"/><property name="child_cpu_s" value="9.0"/>
 <property name="kinds" value="slow"/><property name="setup_s" value="0.5"/></properties></testcase>
<testcase classname="tests.test_registry" name="test_lock" time="2.0">
 <properties><property name="call_s" value="2.0"/><property name="kinds" value=""/>
 <property name="setup_s" value="0.0"/></properties></testcase>
<testcase classname="tests.keras.test_keras_training" name="test_mirrored_strategy_gives_one_devices_weights" time="6.0">
 <properties><property name="setup_s" value="4.0"/><property name="call_s" value="2.0"/>
 <property name="kinds" value="hypothesis"/></properties></testcase>
<testcase classname="tests.test_atomic" name="test_zero" time="0.0"/>
</testsuite></testsuites>
"""


@pytest.fixture
def suite_time(load_tool):
    return load_tool("suite_time")


def test_sums_by_folder_and_kind_and_lists_the_slowest(suite_time, tmp_path, monkeypatch):
    (tmp_path / "tests" / "docs").mkdir(parents=True)
    (tmp_path / "tests" / "docs" / "test_doc_pages.py").write_text("")
    (tmp_path / "tests" / "test_registry.py").write_text("")
    monkeypatch.chdir(tmp_path)  # node ids are found against the files, as in a checkout
    path = tmp_path / "report.xml"
    path.write_text(REPORT)
    cases, wall = suite_time.read(path)
    assert wall == 30.0
    assert [c.node for c in cases][:2] == ["tests/docs/test_doc_pages.py::test_page[frozen.md]",
                                           "tests/test_registry.py::test_lock"]
    assert cases[3].seconds == 0.0 and cases[3].kinds == ()  # a test without properties
    text = suite_time.table(cases, wall, top=2)
    assert text.splitlines()[0] == "4 tests, 20 s summed over tests, 30 s wall."
    assert "| tests/docs | 1 | 12 | 60 % |" in text
    assert "| tests/keras | 1 | 6 | 30 % |" in text
    assert "| tests | 2 | 2 | 10 % |" in text
    assert "| fixture setup (models built, frozen or trained) | 2 | 4 | 22 % |" in text
    assert "| child processes, CPU (fresh interpreters, scripts) | 1 | 9 | 45 % |" in text
    assert "| tests marked slow | 1 | 12 | 60 % |" in text
    assert "| hypothesis examples | 1 | 6 | 30 % |" in text
    assert "| distribution strategies and clusters | 1 | 6 | 30 % |" in text
    slowest = text.split("The 2 slowest tests")[1].splitlines()[2:]
    assert slowest == ["- 12.0 (0.5, 11.5, 9.0) `tests/docs/test_doc_pages.py::test_page[frozen.md]`",
                       "- 6.0 (4.0, 2.0, 0.0) `tests/keras/test_keras_training.py::"
                       "test_mirrored_strategy_gives_one_devices_weights`"]


def test_an_unreadable_report_exits_2_naming_it(suite_time, tmp_path, capsys):
    path = tmp_path / "broken.xml"
    path.write_text("<testsuites><testsuite")
    assert suite_time.main([str(path)]) == 2
    assert "broken.xml: not a readable JUnit XML report" in capsys.readouterr().err


def test_the_suite_records_its_properties(request):
    """tests/suite_timing.py is loaded: this test's own report will carry them."""
    assert request.config.pluginmanager.has_plugin("suite_timing")
