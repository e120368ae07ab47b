"""The groupings of a gradscope.ddp.State's buckets, and the regrouping of a resumed run's first step."""

import torch

from ._tensors import as_float32


class Regrouping:
    """Owns the parameters' ordinals, in the order DDP first handed them over (every new process
    of the model numbers them alike, so checkpoints can name them); the grouping of the buckets
    as they arrive this step and as the core saw them, and the last step's (`layout`, which the
    state_dict keeps); after a load, the grouping to restore and the buckets held for it. DDP
    groups a new process's first step in registration order and regroups after it: the first
    step after a load reaches the core in the saved step's grouping all the same."""

    def __init__(self):
        self._ordinals = {}
        self._arrived, self._seen, self.layout = [], [], None
        self._restore, self._held, self._held_layout = None, None, None

    def keys(self, parameters):
        """The parameters' ordinals."""
        return [self._ordinals.setdefault(id(p), len(self._ordinals)) for p in parameters]

    @property
    def mid_step(self):
        return bool(self._arrived)

    @property
    def restoring(self):
        """Whether a loaded grouping waits to be restored at the next step."""
        return self._restore is not None

    def arrive(self, b):
        """Notes bucket b as DDP hands it over: whether it goes to the core as handed over (else
        it is held for the restored grouping; take_held() at the step's last bucket)."""
        self._arrived.append((b.index, tuple(b.keys)))
        at = len(self._arrived) - 1
        if self._restore is not None and self._held is None:
            if at >= len(self._restore) or self._restore[at] != self._arrived[at]:
                self._held, self._held_layout = [], self._restore[at:]
        if b.last:
            self._arrived, self._restore = [], None
        if self._held is None:
            return True
        self._held.append(b)
        return False

    def take_held(self):
        """The held buckets and the saved grouping of the rest of the step."""
        held, self._held = self._held, None
        return held, self._held_layout

    def saw(self, index, keys, last):
        """The core saw bucket `index` of parameters `keys` (the last of its step when `last`)."""
        self._seen.append((index, tuple(keys)))
        if last:
            self.layout, self._seen = self._seen, []

    def failed(self):
        self._seen = []

    def saved(self):
        return [[index, list(keys)] for index, keys in self.layout or []]

    def restore(self, saved):
        layout = [(int(index), tuple(int(k) for k in keys)) for index, keys in saved]
        self._restore = layout or None
        self.layout = self._restore  # the last step's grouping, until a step after the load ends


class RegroupedStep:
    """The held buckets of a step regrouped into the saved step's buckets: each parameter's values
    gathered from the buckets DDP handed over into the saved buckets, and each handed bucket's
    update gathered back. When the parameters differ from the saved step's (another model), the
    buckets go as handed over."""

    def __init__(self, held, layout):
        self.held = held
        self._pieces = {}  # ordinal -> (bucket, offset, numel)
        for b in held:
            offset = 0
            for k, n in b.params:
                self._pieces[k] = (b, offset, n)
                offset += n
        if sorted(k for _, keys in layout for k in keys) != sorted(self._pieces):
            layout = [(b.index, tuple(b.keys)) for b in held]
        self.layout = layout
        self._update = {}

    def buckets(self, values, variances):
        """Each saved bucket in order, as (index, float32 values, variance or None, [(ordinal,
        numel)], last), from each held bucket's values and variances ({id(bucket): tensor})."""
        for j, (index, keys) in enumerate(self.layout):
            part = [self._pieces[k] for k in keys]
            work = as_float32(torch.cat([values[id(b)][o : o + n] for b, o, n in part]))
            variance = (
                None
                if variances[id(self.held[0])] is None
                else torch.cat([variances[id(b)][o : o + n] for b, o, n in part])
            )
            yield index, work, variance, [(k, n) for k, (_, _, n) in zip(keys, part)], j == len(self.layout) - 1

    def take_update(self, params, out):
        """The update `out` of a saved bucket of `params`."""
        offset = 0
        for k, n in params:
            self._update[k] = out[offset : offset + n]
            offset += n

    def updates(self):
        """(held bucket, its update) for every held bucket."""
        return [(b, torch.cat([self._update[k] for k in b.keys])) for b in self.held]
