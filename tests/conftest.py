"""Shared test setup: quiet TensorFlow, fixtures used across test modules."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

# Retracing and AutoGraph notices are expected here: every test traces fresh
# functions on purpose. Errors still show.
tf.get_logger().setLevel("ERROR")


@pytest.fixture
def rng():
    """A seeded numpy RandomState, fresh for every test."""
    return np.random.RandomState(1234)
