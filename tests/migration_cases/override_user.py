"""Calls the project's own override helper (override_util.py)."""
import tensorflow.compat.v1 as tf

from override_util import override


def clipped_round(x):
    with override({"Round": "CaseUtilClip"}):
        return tf.round(x * 2.0) / 2.0
