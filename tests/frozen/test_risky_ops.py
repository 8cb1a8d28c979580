"""RISKY_OPS: derived from TensorFlow's op registry, plus a curated table."""

import pytest
import tensorflow as tf

from graph_override import frozen
from graph_override._tensorflow import compat
from graph_override.frozen.inspection import risky

# Ops that read or write files or reach the network which a hand-kept list
# missed (issue 19).
MISSED = ("InitializeTableFromTextFile", "InitializeTableFromTextFileV2", "CacheDataset",
          "CacheDatasetV2", "DatasetToTFRecord", "ExperimentalDatasetToTFRecord",
          "SqlDataset", "LMDBDataset", "ExperimentalLMDBDataset", "DataServiceDatasetV4",
          "DecodeProtoV2", "FixedUnigramCandidateSampler", "GenerateVocabRemapping",
          "LoadAndRemapMatrix", "CreateSummaryDbWriter", "DistributedSave")
PLAIN = ("MatMul", "Add", "AddV2", "Sign", "Relu", "Conv2D", "Const", "Identity",
         "Placeholder", "StringJoin", "RegexReplace", "StaticRegexReplace",
         "SetStatsAggregatorDataset", "ParseExampleV2", "DecodeRaw")


@pytest.mark.parametrize("op", MISSED)
def test_every_op_of_the_issue_is_flagged(op):
    assert op in frozen.RISKY_OPS and frozen.RISKY_OPS[op]


@pytest.mark.parametrize("op", MISSED)
def test_the_registry_itself_flags_them_where_registered(op):
    if not compat.is_op_type(op):
        pytest.skip("%s is not registered in TensorFlow %s" % (op, tf.__version__))
    assert op in risky.derived()


@pytest.mark.parametrize("op", PLAIN)
def test_plain_ops_are_not_flagged(op):
    assert compat.is_op_type(op) and op not in frozen.RISKY_OPS


def test_the_derivation_reads_signatures_and_the_curated_reason_wins():
    found = risky.derived()
    assert found["CacheDatasetV2"] == "reads or writes files (input 'filename')"
    assert found["FixedUnigramCandidateSampler"] == "reads or writes files (attr 'vocab_file')"
    assert found["DataServiceDatasetV4"] == (
        "reaches the network or a database (input 'address')")
    assert frozen.RISKY_OPS["ReadFile"] == "reads files"  # curated
    assert set(risky.CURATED) <= set(frozen.RISKY_OPS)
    assert len(frozen.RISKY_OPS) == len(set(found) | set(risky.CURATED))


def test_inspect_reports_a_vocabulary_file_table():
    with tf.Graph().as_default() as g:
        table = tf.raw_ops.HashTableV2(key_dtype=tf.string, value_dtype=tf.int64)
        tf.raw_ops.InitializeTableFromTextFileV2(
            table_handle=table, filename=tf.constant("/etc/passwd"), key_index=-2,
            value_index=-1, name="init")
    report = frozen.inspect(g.as_graph_def())
    assert [(r["node"], r["op"]) for r in report.risky_ops] == [
        ("init", "InitializeTableFromTextFileV2")]
    assert not report.ok
