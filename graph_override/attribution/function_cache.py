"""How many rule sets' functions an `Explainer` keeps: `keep_functions`.

An `Explainer` makes each rule set's function once (saliency, gradient x
input, IG and SmoothGrad share the unpatched one; guided backprop,
deconvnet, epsilon-LRP, DeepLIFT, Grad-CAM's pair and each LRP composite
have one of their own) and, by default, keeps every one it made. In the
exact mode each holds the model's weights as constants, several times over:
its patched GraphDef, the imported graph, the function registered with the
runtime, the forward function TensorFlow derives for the gradient and the
optimized graphs.

With ``keep_functions=N``, after each call the Explainer keeps the functions
that call used and, of the others, the most recently used, N in all; the
rest go, with what was made for them (a compiled gradient in the fast mode):
TensorFlow removes the functions it registered for them and their memory
returns. A rule set used again is made again, and gives the same maps, bit
for bit. The exact mode's weights stay constants: reading them from shared
variables moves its maps by float rounding (Grappler no longer folds a batch
normalization's constant scale into the convolution before it), which the
exact mode does not allow.
"""

import collections
import gc

from graph_override.errors import AttributionError

__all__ = ["KeptFunctions", "check_keep"]


def check_keep(keep):
    """`keep` if it is None (keep every rule set's function) or an int >= 1."""
    if keep is None or (isinstance(keep, int) and not isinstance(keep, bool) and keep >= 1):
        return keep
    raise AttributionError(
        "keep_functions=%r: expected None (keep every rule set's function) or the number "
        "(1 or more) of rule sets' functions to keep, the least recently used let go first"
        % (keep,))


def _ids(value):
    """The ids of `value` and, for a tuple, of its items (the owners of what
    was made for them)."""
    return {id(value)} | ({id(v) for v in value} if isinstance(value, tuple) else set())


class KeptFunctions:
    """The keys of an Explainer's cache (a dict) that hold a rule set's
    functions, in the order of their last use, trimmed to `limit` after each
    call (None: every one is kept, nothing is recorded).

    Attributes:
      limit: the bound.
      released: how many rule sets' functions were let go so far.
    """

    def __init__(self, limit=None):
        self.limit = check_keep(limit)
        self.released = 0
        self._order = collections.OrderedDict()
        self._this_call = set()
        self._dependents = collections.defaultdict(set)  # owner's id -> keys

    def used(self, key):
        """Records a use of the rule set's functions at `key`."""
        if self.limit is not None:
            self._order[key] = None
            self._order.move_to_end(key)
            self._this_call.add(key)

    def made_for(self, key, owner):
        """Records that the entry at `key` was made for `owner` (a function
        of a rule set): it goes when no kept entry holds `owner`."""
        if self.limit is not None:
            self._dependents[id(owner)].add(key)

    def trim(self, entries):
        """After a call: lets go of the least recently used rule sets of
        `entries` beyond the bound (never one this call used), and of the
        entries made for functions no longer kept."""
        if self.limit is None:
            return
        released = self.released
        for key in list(self._order):
            if len(self._order) <= self.limit:
                break
            if key not in self._this_call:
                del self._order[key]
                entries.pop(key, None)
                self.released += 1
        self._this_call.clear()
        live = set()
        for key in self._order:
            if key in entries:
                live |= _ids(entries[key])
        for owner in [o for o in self._dependents if o not in live]:
            for key in self._dependents.pop(owner):
                entries.pop(key, None)
        if self.released != released:
            gc.collect()  # TensorFlow's function objects refer to each other in cycles
