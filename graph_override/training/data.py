"""Real data for the training scripts: scikit-learn's bundled digits.

`sklearn.datasets.load_digits` ships 1797 8x8 handwritten digits inside the
scikit-learn package, so nothing is downloaded. `digits_splits` gives a fixed,
stratified train/test split with pixels scaled to [0, 1]; `domain_shift`
builds the target domain of the domain-adaptation script from the same
digits (uneven lighting: a random brightness ramp on every image), and
`dann_splits` puts source and target together.
"""

import collections
import functools

import numpy as np

__all__ = ["DannSplits", "Split", "batches", "dann_splits", "digits", "digits_splits",
           "domain_shift"]

Split = collections.namedtuple("Split", ["x_train", "y_train", "x_test", "y_test"])
Split.__doc__ = """Features (float32, N x 64, in [0, 1]) and int64 labels."""

DannSplits = collections.namedtuple(
    "DannSplits", ["x_source", "y_source", "x_target", "x_target_test",
                   "y_target_test", "x_source_test", "y_source_test"])
DannSplits.__doc__ = """Labelled source images, unlabelled target images (for
the domain classifier), and labelled held-out target and source images (for
evaluation only)."""

N_FEATURES, N_CLASSES = 64, 10


@functools.lru_cache(maxsize=1)
def digits():
    """scikit-learn's bundled handwritten digits as (features in [0, 1],
    labels), read once per process; callers index them with masks and index
    arrays, which copy. ImportError, saying what to install, without
    scikit-learn."""
    try:
        from sklearn.datasets import load_digits  # pylint: disable=import-outside-toplevel
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "graph_override.training needs scikit-learn for its data "
            "(sklearn.datasets.load_digits ships the digits inside the "
            "package): run `python -m pip install scikit-learn`") from e
    bunch = load_digits()
    return (bunch.data / 16.0).astype(np.float32), bunch.target.astype(np.int64)


def digits_splits(test_fraction=0.25, split_seed=0):
    """The digits, split into a stratified train and held-out test set.

    The split depends only on `split_seed` (not on a training seed), so
    accuracies of runs with different seeds are measured on the same images.

    Example:
      >>> s = digits_splits()
      >>> s.x_train.shape, s.x_test.shape, float(s.x_train.max())
      ((1347, 64), (450, 64), 1.0)

    Args:
      test_fraction: share of each class held out for testing, in (0, 1).
      split_seed: seed of the split.

    Returns:
      A `Split`.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError("digits_splits(test_fraction=%r): use a fraction "
                         "strictly between 0 and 1" % (test_fraction,))
    x, y = digits()
    rng = np.random.RandomState(split_seed)
    test = np.zeros(len(y), bool)
    for c in range(N_CLASSES):
        idx = rng.permutation(np.flatnonzero(y == c))
        test[idx[:int(round(test_fraction * len(idx)))]] = True
    return Split(x[~test], y[~test], x[test], y[test])


def domain_shift(x, seed=0, offset=(0.3, 0.8), gradient=1.0):
    """The target domain: the digits under uneven lighting.

    Each 8x8 image gets a random brightness ramp added,
    ``x + a + b_x (col/7 - 1/2) + b_y (row/7 - 1/2)`` with ``a`` uniform in
    `offset` and ``b_x, b_y`` uniform in [-gradient, gradient] (no
    clipping). The ramp carries no information about the digit, so a
    feature extractor that ignores it loses nothing; a classifier trained on
    the dark-background source images alone is confused by it.

    Example:
      >>> x = np.zeros((2, 64), np.float32)
      >>> t = domain_shift(x)
      >>> t.shape, bool((t != 0).all())
      ((2, 64), True)

    Args:
      x: images, N x 64, in [0, 1].
      seed: seed of the random ramps.
      offset: (low, high) of the added brightness.
      gradient: largest slope of the ramp across the image (>= 0).

    Returns:
      float32 array of the shape of x.
    """
    x = np.asarray(x, np.float32)
    if x.ndim != 2 or x.shape[1] != N_FEATURES:
        raise ValueError("domain_shift: expected images of shape (N, %d), got %s"
                         % (N_FEATURES, x.shape))
    if gradient < 0 or offset[0] > offset[1]:
        raise ValueError("domain_shift: need gradient >= 0 and offset low <= "
                         "high, got gradient=%r, offset=%r" % (gradient, offset))
    rng = np.random.RandomState(seed)
    n = len(x)
    ramp = np.arange(8) / 7.0 - 0.5
    a = rng.uniform(offset[0], offset[1], size=(n, 1, 1))
    b_x = rng.uniform(-gradient, gradient, size=(n, 1, 1))
    b_y = rng.uniform(-gradient, gradient, size=(n, 1, 1))
    img = (x.reshape(-1, 8, 8) + a + b_x * ramp[None, None, :]
           + b_y * ramp[None, :, None])
    return img.astype(np.float32).reshape(-1, N_FEATURES)


def dann_splits(seed=0, split_seed=0, **shift):
    """Source and target domains for domain-adversarial training.

    The training images are split in two disjoint halves: labelled source
    images, and images that go through `domain_shift` and are used without
    labels as the target domain. The held-out test images, shifted the same
    way, measure target accuracy (and unshifted, source accuracy).
    `shift` is passed to `domain_shift` (offset, gradient).

    Example:
      >>> d = dann_splits()
      >>> d.x_source.shape[0] + d.x_target.shape[0], d.x_target_test.shape
      (1347, (450, 64))
    """
    s = digits_splits(split_seed=split_seed)
    order = np.random.RandomState(split_seed + 1).permutation(len(s.y_train))
    half = len(order) // 2
    src, tgt = order[:half], order[half:]
    return DannSplits(
        s.x_train[src], s.y_train[src],
        domain_shift(s.x_train[tgt], seed=seed, **shift),
        domain_shift(s.x_test, seed=seed + 10007, **shift),
        s.y_test, s.x_test, s.y_test)


def batches(n, batch_size, seed, epoch):
    """The minibatch index arrays of one epoch, a pure function of its args.

    Because the order depends only on (seed, epoch), a run resumed from a
    checkpoint sees exactly the batches an uninterrupted run would. The last
    incomplete batch is dropped (batch normalization needs full batches).

    Example:
      >>> [b.tolist() for b in batches(5, 2, seed=0, epoch=0)]
      [[2, 0], [3, 4]]
    """
    if not 1 <= batch_size <= n:
        raise ValueError("batches: batch_size must be between 1 and the %d "
                         "examples, got %r" % (n, batch_size))
    order = np.random.RandomState([seed % (2 ** 32), epoch]).permutation(n)
    return [order[i:i + batch_size] for i in range(0, n - batch_size + 1, batch_size)]
