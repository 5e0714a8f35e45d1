"""experiments/sweep/reuse.py: a reused trial process rebuilds its trainable in place, keeping nothing of the last
trial (the main job's numbers are the same with it: a run's verdict before and after, docs/benchmarks.md)."""
from __future__ import annotations

from ray.tune import Trainable
from ray.tune.registry import register_trainable

from experiments.sweep.reuse import RebuiltInPlace, reusable


class Counter(Trainable):
    cleaned: list[int] = []

    def setup(self, config):
        self.seen = config["x"]
        self.builds = getattr(self, "builds", 0) + 1

    def step(self):
        return {"x": self.seen, "done": True}

    def cleanup(self):
        Counter.cleaned.append(self.seen)


def test_reusable_keeps_the_trainables_name_and_class_and_is_idempotent():
    cls = reusable(Counter)
    assert cls.__name__ == "Counter" and issubclass(cls, Counter) and issubclass(cls, RebuiltInPlace)
    assert reusable(cls) is cls


def test_a_registered_name_becomes_its_class():
    register_trainable("reuse_test_counter", Counter)
    assert issubclass(reusable("reuse_test_counter"), Counter)


def test_reset_stops_the_last_trial_and_builds_the_next_from_nothing(tmp_path, monkeypatch):
    import ray.tune.trainable.trainable as module

    monkeypatch.setattr(module, "DEFAULT_STORAGE_PATH", str(tmp_path))  # its log folders, without Tune's storage
    Counter.cleaned.clear()
    trainable = reusable(Counter)(config={"x": 1})
    assert trainable.train()["training_iteration"] == 1
    trainable.leftover = "state of trial 1"
    assert trainable.reset({"x": 2}) is True
    assert Counter.cleaned == [1]                 # the finished trial's cleanup ran
    assert not hasattr(trainable, "leftover")     # nothing of it carried over
    assert trainable.builds == 1 and trainable.seen == 2
    result = trainable.train()
    assert result["x"] == 2 and result["training_iteration"] == 1
    trainable.stop()
