"""An optimizer's parameter group and the captured steps that read it (gt.guards, pure)."""

from __future__ import annotations

import copy
import pickle

import pytest

from gt import guards
from gt.guards import Hyperparameters


class _HeldRate:
    """Stands in for the float64 0-d tensor on the worker: records the writes it gets."""

    class _Conn:
        closed = False

    def __init__(self) -> None:
        self._conn = self._Conn()
        self.writes: list = []

    def __setitem__(self, key, value) -> None:
        assert key is Ellipsis
        self.writes.append(value)


@pytest.fixture
def group():
    return Hyperparameters({"lr": 0.1, "momentum": 0.9, "dampening": 0.0})


def test_setting_the_same_rate_again_captures_nothing_again(group):
    v = guards.version()
    group["lr"] = 0.1  # (a scheduler's first step recomputes the same number)
    assert guards.version() == v and not group.lr_varies


def test_a_new_rate_that_no_capture_read_captures_nothing_again(group):
    v = guards.version()
    group["lr"] = 0.05  # (an optimizer that runs eagerly next to a captured step)
    assert guards.version() == v and group.lr_varies and group["lr"] == 0.05


def test_a_new_rate_goes_into_the_tensor_that_captured_steps_read(group):
    held = group.lr_on_worker = _HeldRate()
    v = guards.version()
    group["lr"] = 0.05
    group["lr"] = 0.025
    assert guards.version() == v and held.writes == [0.05, 0.025] and group["lr"] == 0.025


def test_a_rate_read_while_a_call_is_recorded_is_baked_and_a_new_one_captures_again(
    group, monkeypatch
):
    made: list = []
    monkeypatch.setattr(guards, "make_rate", lambda v: made.append(v) or _HeldRate())
    held = group.lr_on_worker = _HeldRate()
    guards.recording += 1
    try:
        assert group["momentum"] == 0.9 and group.get("momentum") == 0.9
        assert not group.lr_baked  # (only the rate counts)
        assert group["lr"] == 0.1
    finally:
        guards.recording -= 1
    assert group.lr_baked
    v = guards.version()
    group["lr"] = 0.05
    assert guards.version() == v + 1 and held.writes == []
    # every step is captured again from here, reading a new tensor made with the new rate (made
    # now: the first recorded call then reads it as the next ones do)
    assert not group.lr_baked and group.lr_varies and made == [0.05]
    group["lr"] = 0.025
    assert guards.version() == v + 1 and group.lr_on_worker.writes == [0.025]


def test_reading_the_rate_outside_a_recorded_call_bakes_nothing(group):
    assert group["lr"] == 0.1 and not group.lr_baked


def test_a_rate_set_inside_a_recorded_call_or_not_a_number_captures_again(group):
    held = group.lr_on_worker = _HeldRate()
    guards.recording += 1
    try:
        v = guards.version()
        group["lr"] = 0.05
    finally:
        guards.recording -= 1
    assert guards.version() == v + 1 and held.writes == []
    group.lr_on_worker = held
    v = guards.version()
    group["lr"] = "0.01"
    assert guards.version() == v + 1 and held.writes == []


def test_a_tensor_of_a_closed_connection_is_dropped(group):
    held = group.lr_on_worker = _HeldRate()
    held._conn.closed = True
    group["lr"] = 0.05
    assert group.lr_on_worker is None and held.writes == []


def test_update_sets_each_key_as_an_assignment_would(group):
    held = group.lr_on_worker = _HeldRate()
    v = guards.version()
    group.update({"lr": 0.1}, momentum=0.9)  # (the values it has: an optimizer's defaults)
    assert guards.version() == v and not group.lr_varies and held.writes == []
    group.update(lr=0.2)
    assert guards.version() == v and held.writes == [0.2] and group["lr"] == 0.2
    group.update(dampening=0.5)  # (a key no capture reads on the worker)
    assert guards.version() == v + 1 and group["dampening"] == 0.5


def test_clear_and_pop_of_the_rate_forget_the_tensor_and_other_keys_keep_it(group):
    for change, forgets in ((lambda g: g.clear(), True), (lambda g: g.pop("lr"), True),
                            (lambda g: g.pop("momentum"), False)):  # fmt: skip
        dict.update(group, lr=0.1, momentum=0.9)
        held = group.lr_on_worker = _HeldRate()
        v = guards.version()
        change(group)
        assert guards.version() == v + 1 and (group.lr_on_worker is None) == forgets
        assert held.writes == []


def test_copies_are_plain_new_groups(group):
    group.lr_on_worker, group.lr_varies, group.lr_baked = _HeldRate(), True, True
    for other in (copy.deepcopy(group), pickle.loads(pickle.dumps(group)), copy.copy(group)):
        assert type(other) is Hyperparameters and dict(other) == dict(group)
        assert other.lr_on_worker is None and not other.lr_varies and not other.lr_baked


def test_a_numpy_rate_is_a_number_and_a_tensor_rate_replaced_by_one_captures_again(group):
    np = pytest.importorskip("numpy")
    held = group.lr_on_worker = _HeldRate()
    group["lr"] = np.float64(0.05)  # (a LambdaLR built with np.cos returns these)
    assert held.writes == [0.05]
    tensor_rate = object()  # (stands in for a tensor the program gave: not a number)
    dict.__setitem__(group, "lr", tensor_rate)
    v = guards.version()
    group["lr"] = 0.02
    assert guards.version() == v + 1 and held.writes == [0.05]


def test_reading_the_whole_group_or_the_last_rates_while_recorded_bakes_the_rate(group):
    for read in (dict, lambda g: list(g.items()), lambda g: {**g}, lambda g: g.copy(),
                 lambda g: guards.read_rates([g])):  # fmt: skip
        group.lr_baked = False
        guards.recording += 1
        try:
            read(group)
        finally:
            guards.recording -= 1
        assert group.lr_baked, read
    group.lr_baked = False
    dict(group), guards.read_rates([group])
    assert not group.lr_baked  # (outside a recorded call nothing is baked)


def test_setting_a_hyperparameter_inside_a_recorded_call_says_it_cannot_replay(group):
    guards.written = None
    guards.recording += 1
    try:
        group["momentum"] = 0.9  # (even the same value: a replay would not set it again)
    finally:
        guards.recording -= 1
    assert guards.written is not None and "scheduler" in guards.written
    guards.written = None


# ---------------------------------------------------------------- momentum and beta1 (cycled)


@pytest.fixture
def adam_group():
    return Hyperparameters({"lr": 0.1, "betas": (0.9, 0.999), "eps": 1e-8})


def _recorded(read) -> None:
    guards.recording += 1
    try:
        read()
    finally:
        guards.recording -= 1


def test_a_new_momentum_goes_into_the_tensor_that_captured_steps_read(group):
    held = group.on_worker["momentum"] = _HeldRate()
    v = guards.version()
    group["momentum"] = 0.85  # (OneCycleLR / CyclicLR with cycle_momentum, every step)
    group["momentum"] = 0.8
    assert guards.version() == v and held.writes == [0.85, 0.8]
    assert "momentum" in group.varies and group["momentum"] == 0.8


def test_a_momentum_read_while_a_call_is_recorded_is_baked_and_a_new_one_captures_again(
    group, monkeypatch
):
    made: list = []
    monkeypatch.setattr(guards, "make_rate", lambda v: made.append(v) or _HeldRate())
    held = group.on_worker["momentum"] = _HeldRate()
    _recorded(lambda: group["lr"])
    assert "momentum" not in group.baked  # (only the key read counts)
    _recorded(lambda: group["momentum"])
    assert "momentum" in group.baked
    v = guards.version()
    group["momentum"] = 0.85
    assert guards.version() == v + 1 and held.writes == [] and made == [0.85]
    assert "momentum" not in group.baked and group.lr_baked  # (each key on its own)
    group["momentum"] = 0.8
    assert guards.version() == v + 1 and group.on_worker["momentum"].writes == [0.8]


def test_a_momentum_that_becomes_zero_or_stops_being_zero_captures_again(group):
    held = group.on_worker["momentum"] = _HeldRate()
    v = guards.version()
    group["momentum"] = 0.0  # (``if momentum:`` in the step: other instructions)
    assert guards.version() == v + 1 and held.writes == []
    group.on_worker["momentum"] = held
    group["momentum"] = 0.5
    assert guards.version() == v + 2 and held.writes == []


def test_a_new_beta1_in_a_new_pair_goes_into_the_tensor_and_beta2_stays_a_number(adam_group):
    held = adam_group.on_worker["betas"] = _HeldRate()
    v = guards.version()
    adam_group["betas"] = (0.9, 0.999)  # (the same pair again, a new tuple)
    adam_group["betas"] = (0.85, 0.999)  # (what OneCycleLR assigns: (m, *betas[1:]))
    adam_group["betas"] = (0.8, 0.999)
    assert guards.version() == v and held.writes == [0.85, 0.8]
    assert adam_group["betas"] == (0.8, 0.999) and "betas" in adam_group.varies


def test_a_new_beta2_a_list_or_not_a_number_captures_again(adam_group):
    for betas in ((0.8, 0.99), [0.7, 0.99], ("0.6", 0.99), (0.5, 0.99, 0.1), (0.9, 0.99)):
        held = adam_group.on_worker["betas"] = _HeldRate()
        v = guards.version()
        adam_group["betas"] = betas
        assert guards.version() == v + 1 and held.writes == [], betas
        assert "betas" not in adam_group.on_worker and adam_group["betas"] == betas
    held = adam_group.on_worker["betas"] = _HeldRate()
    adam_group["betas"] = (0.85, 0.99)  # (a pair again: held from here)
    assert held.writes == [0.85]


def test_betas_read_while_a_call_is_recorded_are_baked_and_a_new_pair_captures_again(
    adam_group, monkeypatch
):
    made: list = []
    monkeypatch.setattr(guards, "make_rate", lambda v: made.append(v) or _HeldRate())
    for read in (lambda g: g["betas"], lambda g: g.get("betas"), dict, lambda g: {**g},
                 lambda g: list(g.values()), lambda g: g.copy()):  # fmt: skip
        adam_group.baked.clear()
        held = adam_group.on_worker["betas"] = _HeldRate()
        _recorded(lambda r=read: r(adam_group))
        assert "betas" in adam_group.baked, read
        v = guards.version()
        adam_group["betas"] = (adam_group.get("betas")[0] - 0.01, 0.999)
        assert guards.version() == v + 1 and held.writes == [], read
        assert "betas" not in adam_group.baked and len(made) and made[-1] == adam_group["betas"][0]


def test_a_momentum_or_betas_set_inside_a_recorded_call_captures_again(group, adam_group):
    for g, key, value in ((group, "momentum", 0.8), (adam_group, "betas", (0.8, 0.999))):
        held = g.on_worker[key] = _HeldRate()
        v = guards.version()
        _recorded(lambda: g.__setitem__(key, value))  # noqa: B023
        assert guards.version() == v + 1 and held.writes == [] and key not in g.on_worker
        guards.written = None


def test_clear_and_pop_forget_each_held_tensor_they_touch(group):
    for key in ("lr", "momentum"):
        group.on_worker[key] = _HeldRate()
    group.pop("momentum")
    assert "momentum" not in group.on_worker and "lr" in group.on_worker
    group.clear()
    assert group.on_worker == {}
