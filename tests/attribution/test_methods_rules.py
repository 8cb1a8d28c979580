"""The method table: rules per method, rule strings, unknown names."""

import pytest

from graph_override.attribution import method_record, method_table
from graph_override.errors import AttributionError


def test_every_method_is_listed_with_its_rules_and_baseline():
    import inspect  # pylint: disable=import-outside-toplevel
    for name, spec in method_table.METHODS.items():
        taken = inspect.signature(spec.run).parameters
        assert spec.baseline == ("baseline" in taken), name
        assert spec.batch in method_record.BATCH_LAYOUTS, name
        assert spec.summary and spec.summary in method_table.table_markdown(), name
    assert {"integrated_gradients", "deeplift"} <= {
        m for m, s in method_table.METHODS.items() if s.baseline}
    assert set(method_table.METHODS["guided_backprop"].rules) == set(method_table.RELU_OPS)
    assert set(method_table.METHODS["deeplift"].rules) == set(method_table.NONLINEAR_OPS)
    assert method_table.METHODS["saliency"].rules == {}


def test_no_op_is_both_linear_and_overridden():
    assert not set(method_table.NONLINEAR_OPS) & method_table.LINEAR_OPS
    assert {"MaxPool", "FusedBatchNormV3", "MatMul", "Conv2D"} <= method_table.LINEAR_OPS


def test_rule_strings_carry_defaults_and_overrides():
    assert method_table.rule_strings("eps_lrp")[0] == "Relu=eps_lrp:epsilon=0.0001"
    assert method_table.rule_strings("eps_lrp", epsilon=0.5)[-1] == "Softplus=eps_lrp:epsilon=0.5"
    assert method_table.rule_strings("guided_backprop") == [
        "Relu=guided_relu", "Relu6=guided_relu", "LeakyRelu=guided_relu"]
    assert method_table.rule_strings("saliency") == []
    assert method_table.rule_strings("deeplift")[0] == "Relu=deeplift_rescale:shared_reference=False"
    assert method_table.rule_strings("deeplift", shared_reference=True)[-1] == (
        "Softplus=deeplift_rescale:shared_reference=True")


def test_unknown_method_suggests_the_nearest():
    with pytest.raises(AttributionError, match=r"'deeplfit'.*Did you mean 'deeplift'"):
        method_table.method_spec("deeplfit")
    with pytest.raises(AttributionError, match="Methods: saliency"):
        method_table.method_spec(None)


def test_unknown_rule_parameter_is_refused():
    with pytest.raises(AttributionError, match="takes no rule parameter epsilon; it takes none"):
        method_table.rule_strings("guided_backprop", epsilon=0.1)
    with pytest.raises(AttributionError, match="takes no rule parameter epsilon; it takes "
                                               "shared_reference"):
        method_table.rule_strings("deeplift", epsilon=0.1)


def test_the_package_exports_each_public_name_lazily():
    import graph_override.attribution as attribution  # pylint: disable=import-outside-toplevel
    assert sorted(attribution.__all__) == sorted(attribution._NAMES)  # pylint: disable=protected-access
    for name in attribution.__all__:
        assert getattr(attribution, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'salency'"):
        attribution.salency  # noqa: B018  pylint: disable=pointless-statement
