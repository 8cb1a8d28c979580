"""An estimator's name is looked up in the estimator table once, from every
entry point: a built-in gradient name the registry resolves, a `--map`
rule, a graph patched into its portable form, an Estimator Keras loads.
After that the record itself travels, and nothing parses the name again."""

import collections
import itertools
import types

import pytest
import tensorflow as tf

from graph_override import estimators, frozen, registry, tf2
from graph_override.estimators import _record

_fresh = itertools.count(1)


class _CountingTable(collections.OrderedDict):
    """The table, counting every look-up of a name (not iterations)."""

    lookups = 0

    def __getitem__(self, key):
        type(self).lookups += 1
        return super().__getitem__(key)

    def __contains__(self, key):
        type(self).lookups += 1
        return super().__contains__(key)

    def get(self, key, default=None):
        type(self).lookups += 1
        return super().get(key, default)


@pytest.fixture
def table(monkeypatch):
    counting = _CountingTable(_record._TABLE)
    view = types.MappingProxyType(counting)
    monkeypatch.setattr(_record, "_TABLE", counting)
    monkeypatch.setattr(_record, "ESTIMATORS", view)
    monkeypatch.setattr(estimators, "ESTIMATORS", view)
    monkeypatch.setattr(_CountingTable, "lookups", 0)
    return _CountingTable


def _sign_graph():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        tf.sign(x, name="y")
    return g.as_graph_def()


def _clip():
    """A clip value no earlier test has registered a name for."""
    return 0.5 + next(_fresh) / 1024


def test_the_registry_looks_a_builtin_name_up_once(table):
    name = "graph_override.ste_sign(clip_value=%r)" % _clip()
    assert registry.is_resolvable(name)
    assert table.lookups == 1
    table.lookups = 0
    assert registry.resolve(name) == name
    assert table.lookups == 1
    table.lookups = 0
    assert registry.resolve(name) == name  # registered now: no look-up at all
    assert table.lookups == 0


def test_a_map_rule_looks_its_estimator_up_once(table):
    clip = _clip()
    rule = frozen.parse_rule("Sign=ste_sign:clip_value=%r" % clip)
    assert rule.target == "graph_override.ste_sign(clip_value=%r)" % clip
    assert table.lookups == 1


@pytest.mark.parametrize("portable", [True, False], ids=["portable", "names"])
def test_patching_looks_the_estimator_up_once(table, portable):
    apply = frozen.make_portable if portable else frozen.patch
    _, report = apply(_sign_graph(), ["Sign=ste_sign:clip_value=%r" % _clip()])
    assert [c.node for c in report.changes] == ["y"]
    assert table.lookups == 1


def test_keras_loading_an_estimator_looks_it_up_once(table):
    config = {"estimator": "ste_tern", "threshold_value": 0.1, "clip_value": 1.0,
              "ternary_weight_networks": False}
    restored = tf2.Estimator.from_config(config)
    assert restored.get_config() == config
    assert table.lookups == 1


def test_an_unknown_name_still_raises_everywhere(table):
    with pytest.raises(frozen.RuleError, match="ste_sing"):
        frozen.parse_rule("Sign=ste_sing")
    assert not registry.is_resolvable("graph_override.ste_sing(clip_value=1.0)")
    with pytest.raises(estimators.UnknownEstimatorError, match="Did you mean 'ste_sign'"):
        tf2.Estimator("ste_sing")
