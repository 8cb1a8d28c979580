"""The training runs behind scripts/train_*.py: data + model + loop.

Each function trains one model on the digits and returns what the script
prints; the scripts only parse arguments and print. All runs are a pure
function of their arguments (seeded initializers, seeded minibatch order,
single-threaded Session), so two families give the same losses.
"""

import collections

from graph_override.training import data, loop, models

__all__ = ["DannComparison", "DoReFaRow", "train_bnn", "train_dann",
           "train_dorefa"]

BATCH_SIZE = 64


def _classifier_feeds(x, y, batch_size, seed):
    def feeds(model, epoch):
        return [{model.inputs["x"]: x[i], model.inputs["y"]: y[i]}
                for i in data.batches(len(y), batch_size, seed, epoch)]
    return feeds


def _eval_sets(**sets):
    def feeds(model):
        return {name: {model.inputs["x"]: x, model.inputs["y"]: y}
                for name, (x, y) in sets.items()}
    return feeds


def _subdirs(loop_args, name):
    args = dict(loop_args)
    for key in ("checkpoint_dir", "logdir"):
        if args.get(key):
            args[key] = "%s/%s" % (args[key].rstrip("/"), name)
    return args


def _data_seed(seed, cluster):
    # Workers of a cluster see different minibatch orders (data parallelism).
    return seed if cluster is None else seed + 7919 * cluster.task_index


def train_bnn(family="overrides", *, epochs=20, seed=0, hidden=(256, 256),
              learning_rate=0.005, batch_size=BATCH_SIZE, **loop_args):
    """Trains the binarized network of `models.build_bnn` on the digits.

    Example:
      >>> r = train_bnn("stopgrad", epochs=1, hidden=(32,))
      >>> r.global_step, 0.0 < r.evaluations[-1][2]["test"] <= 1.0
      (21, True)

    Args:
      family: "overrides", "stopgrad", "tf2" or the module.
      epochs, seed, hidden, learning_rate, batch_size: the run's settings.
      **loop_args: passed to `loop.train` (logdir, checkpoint_dir, cluster,
        progress, checkpoint_every, on_step, log, ...).

    Returns:
      `loop.TrainResult`; evaluations hold "train" and "test" accuracy.
    """
    models.resolve_family(family)  # fail before loading data
    split = data.digits_splits()
    steps_per_epoch = len(split.y_train) // batch_size
    return loop.train(
        lambda: models.build_bnn(family, hidden=hidden, learning_rate=learning_rate,
                                 decay_steps=max(1, 5 * steps_per_epoch), seed=seed),
        _classifier_feeds(split.x_train, split.y_train, batch_size,
                          _data_seed(seed, loop_args.get("cluster"))),
        _eval_sets(train=(split.x_train, split.y_train),
                   test=(split.x_test, split.y_test)),
        epochs=epochs, seed=seed, **loop_args)


DoReFaRow = collections.namedtuple("DoReFaRow", ["weight_bits", "activation_bits",
                                                 "test_accuracy", "result"])


def train_dorefa(family="overrides", *, bits=((1, 2), (2, 2), (2, 4), (4, 4)),
                 epochs=15, seed=0, hidden=(256, 256), learning_rate=0.005,
                 batch_size=BATCH_SIZE, **loop_args):
    """Trains DoReFa networks for several (weight bits, activation bits).

    Example:
      >>> rows = train_dorefa("overrides", bits=[(1, 2)], epochs=1, hidden=(32,))
      >>> rows[0].weight_bits, rows[0].activation_bits
      (1, 2)

    Args:
      bits: [(weight bits, activation bits)], one run each.
      **loop_args: passed to `loop.train`; a checkpoint_dir or logdir gets
        one subdirectory per setting ("w1a2", ...).

    Returns:
      [DoReFaRow], one per bit setting, in the order given.
    """
    models.resolve_family(family)
    split = data.digits_splits()
    steps_per_epoch = len(split.y_train) // batch_size
    rows = []
    for w_bits, a_bits in bits:
        result = loop.train(
            lambda w=w_bits, a=a_bits: models.build_dorefa(
                family, weight_bits=w, activation_bits=a, hidden=hidden,
                learning_rate=learning_rate,
                decay_steps=max(1, 5 * steps_per_epoch), seed=seed),
            _classifier_feeds(split.x_train, split.y_train, batch_size,
                              _data_seed(seed, loop_args.get("cluster"))),
            _eval_sets(test=(split.x_test, split.y_test)),
            epochs=epochs, seed=seed, **_subdirs(loop_args, "w%da%d" % (w_bits, a_bits)))
        rows.append(DoReFaRow(w_bits, a_bits, result.evaluations[-1][2]["test"], result))
    return rows


DannComparison = collections.namedtuple("DannComparison", [
    "source_only", "dann", "source_only_result", "dann_result"])
DannComparison.__doc__ = """Target-domain test accuracy without and with
domain-adversarial training (same architecture, steps and seed)."""


def _dann_feeds(d, batch_size, seed, with_target):
    n_t = len(d.x_target)

    def feeds(model, epoch):
        out = []
        j = data.batches(n_t, batch_size, seed + 1, epoch) if with_target else None
        for i in data.batches(len(d.y_source), batch_size, seed, epoch):
            feed = {model.inputs["x"]: d.x_source[i], model.inputs["y"]: d.y_source[i]}
            if with_target:
                feed[model.inputs["x_target"]] = d.x_target[j[len(out) % len(j)]]
            out.append(feed)
        return out
    return feeds


def train_dann(family="overrides", *, epochs=100, seed=0, domain_weight=1.0,
               reversal_scale=1.0, hidden=(128, 64), learning_rate=0.01,
               batch_size=BATCH_SIZE, source_only=True, **loop_args):
    """Source-only and domain-adversarial training on `data.dann_splits`.

    Example:
      >>> c = train_dann("stopgrad", epochs=1, hidden=(16, 8))
      >>> sorted(c.dann_result.evaluations[-1][2])
      ['source_test', 'target_test']

    Args:
      domain_weight: weight of the domain loss in the DANN run.
      reversal_scale: the flip_gradient scale (lambda of the paper).
      source_only: also train the baseline (domain_weight=0).
      **loop_args: passed to `loop.train`; a checkpoint_dir or logdir gets
        one subdirectory per run ("source_only", "dann"), log messages a
        "[source_only] " or "[dann] " prefix.

    Returns:
      `DannComparison` (source_only is None when not trained).
    """
    models.resolve_family(family)
    d = data.dann_splits(seed=seed)
    runs = {}
    for name, weight in (("source_only", 0.0), ("dann", domain_weight)):
        if name == "source_only" and not source_only:
            continue
        args = _subdirs(loop_args, name)
        if args.get("log"):
            args["log"] = lambda m, log=args["log"], name=name: log("[%s] %s" % (name, m))
        runs[name] = loop.train(
            lambda w=weight: models.build_dann(
                family, domain_weight=w, reversal_scale=reversal_scale,
                hidden=hidden, learning_rate=learning_rate, seed=seed,
                total_steps=epochs * (len(d.y_source) // batch_size)),
            _dann_feeds(d, batch_size, _data_seed(seed, args.get("cluster")),
                        with_target=weight > 0),
            _eval_sets(target_test=(d.x_target_test, d.y_target_test),
                       source_test=(d.x_source_test, d.y_source_test)),
            epochs=epochs, seed=seed, **args)
    acc = {k: r.evaluations[-1][2]["target_test"] for k, r in runs.items()}
    return DannComparison(acc.get("source_only"), acc["dann"],
                          runs.get("source_only"), runs["dann"])
