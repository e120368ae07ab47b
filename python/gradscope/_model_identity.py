"""Which DDP model a gradscope.ddp.State serves: one State, one model."""

import enum

from . import _gradscope


class Stage(enum.Enum):
    LEARNING = "learning"  # in a first step: the buckets name the model's parameters
    KNOWN = "known"  # after the first step's last bucket: a bucket with another parameter is another model's
    ABANDONED = "abandoned"  # the rest of a first step another model joined: the core refuses it (the step failed)


class ModelIdentity:
    """Owns the parameters of the model a state serves, as the buckets of its first step name
    them, and where the state stands in learning them (Stage). Later, a bucket holding another
    parameter is another model's, and so is, in the first step, a second bucket 0 of parameters
    not seen yet (DDP hands a model's buckets over from bucket 0 on); the state then learns again
    from the next step, without the other model's buckets."""

    def __init__(self):
        self.stage = Stage.LEARNING
        self._params = set()

    def refusal(self, index, keys, last):
        """The error for bucket `index` holding parameters `keys` (ids) when it is another
        model's, else None."""
        keys = set(keys)
        if self.stage is Stage.ABANDONED:
            if last:
                self.stage = Stage.LEARNING
            return None
        if self.stage is Stage.KNOWN:
            if keys <= self._params:
                return None
        elif index == 0 and self._params and keys.isdisjoint(self._params):
            self._params = set()
            self.stage = Stage.LEARNING if last else Stage.ABANDONED
        else:
            self._params |= keys
            if last:
                self.stage = Stage.KNOWN
            return None
        return _gradscope.Error(
            f"bucket {index} holds parameters this State did not see in its first "
            "step: one State per DDP model (it is registered on a second model); "
            "make a gradscope.ddp.State for each model"
        )
