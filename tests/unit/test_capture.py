"""Capturing a repeated step, on synthetic instruction streams (no connection, no worker)."""

from __future__ import annotations

import pytest

from gt.runtime import ops as O
from gt.runtime.client.capture import (
    CallRecord,
    NotCapturable,
    build_template,
    canonical,
    same_step,
)

OP = O.OPCODE
W, B = 1, 2  # a parameter and an optimizer buffer: the same ids every call


class Stream:
    """Makes calls of a training-like step: ``g = x @ W`` (made), ``loss = sum(g)`` (returned),
    ``B *= 0.9`` (in place), freeing last call's ``g`` (kept by the program as ``p.grad``)."""

    def __init__(self) -> None:
        self.next = 100
        self.prev_g: int | None = None

    def call(self, x: int, extra_op: bool = False, shape: int = 4, seed: int = 0,
             zero_grad_outside: bool = False) -> CallRecord:  # fmt: skip
        lo = self.next
        rec = CallRecord(lo, [x])
        g, loss = self._id(), self._id()
        rec.instrs.append([OP["matmul"], g, [x, W], None, 3])
        if self.prev_g is not None and not zero_grad_outside:
            rec.freed.add(self.prev_g)  # zero_grad(set_to_none=True) drops last step's gradient
        rec.instrs.append([OP["sum"], loss, [g], {"axis": None, "keepdims": False}, 4])
        rec.instrs.append([OP["mul"], B, [B, 0.9], {"inplace": True}, 5])
        rec.instrs.append([OP["randn"], self._id(), [], {"shape": [shape], "dtype": "float32",
                                                         "seed": seed}, 6])  # fmt: skip
        if extra_op:
            rec.instrs.append([OP["neg"], self._id(), [g], None, 7])
        rec.freed.add(rec.instrs[3][1])  # the random tensor dies inside the call
        rec.returned = [loss]
        rec.close()
        self.prev_g = g
        return rec

    def _id(self) -> int:
        self.next += 1
        return self.next


def test_two_calls_of_the_same_step_match_whatever_their_ids_and_seeds():
    s = Stream()
    a, b, c = s.call(10), s.call(20, seed=5), s.call(30, seed=9)
    ca, cb, cc = canonical(a, None), canonical(b, a), canonical(c, b)
    assert same_step(cb, cc)
    assert ca[0][2] == (("a", 0), ("x", W))  # the argument, the parameter by its id
    assert cb[0][1] == ("m", 0) and cb[2][1] == ("x", B)


def test_a_different_op_or_shape_is_a_different_step():
    s = Stream()
    a = s.call(10)
    b = s.call(20)
    assert not same_step(canonical(b, a), canonical(s.call(30, extra_op=True), b))
    s = Stream()
    a, b = s.call(10), s.call(20)
    assert not same_step(canonical(b, a), canonical(s.call(30, shape=5), b))


def test_the_template_names_inputs_results_temporaries_and_what_the_program_keeps():
    s = Stream()
    s.call(10)
    b = s.call(20)
    c = s.call(30)
    tpl = build_template(c, b)
    g, loss, rnd = (ins[1] for ins in c.instrs[:2] + c.instrs[3:4])
    assert tpl.inputs == [30] and tpl.outs == [loss]
    assert tpl.temps == [rnd] and tpl.kept == [g]
    assert tpl.reads == [W, B]
    assert [s[0] for s in tpl.steps] == [OP["matmul"], OP["sum"], OP["mul"], OP["randn"]]
    attrs = tpl.attrs(3, "step")
    assert attrs["plan"] == 3 and attrs["steps"] is tpl.steps and attrs["temps"] == [rnd]


def test_last_calls_tensors_are_read_as_this_calls_own():
    # accumulating gradients: this call reads last call's g (made by its instruction 0)
    s = Stream()
    s.call(10)
    b = s.call(20)
    c = s.call(30)
    c.instrs.append([OP["add"], c.instrs[0][1], [c.instrs[0][1], b.instrs[0][1]], None, 8])
    c.freed.discard(b.instrs[0][1])
    with pytest.raises(NotCapturable, match="keeps every call's result"):
        build_template(c, b)  # b's g is still alive next to c's: a replay would overwrite both
    c.freed.add(b.instrs[0][1])
    tpl = build_template(c, b)
    assert tpl.steps[-1][2] == [c.instrs[0][1], c.instrs[0][1]]  # read as this call's g


def test_a_gradient_made_where_there_was_none_is_a_fresh_result_of_every_replay():
    # zero_grad() outside the step: last call's g is freed before this call, not inside it
    s = Stream()
    s.call(10)
    b = s.call(20, zero_grad_outside=True)
    c = s.call(30, zero_grad_outside=True)
    with pytest.raises(NotCapturable, match="keeps every call's result"):
        build_template(c, b)  # (as far as the two calls tell, b's g is still alive)
    g, loss = c.instrs[0][1], c.instrs[1][1]
    b.grads, c.grads = {b.instrs[0][1]: None}, {g: None}  # each left as a .grad that had none
    tpl = build_template(c, b)
    assert tpl.rebound == [g] and tpl.outs == [loss, g] and tpl.kept == []
    assert tpl.attrs(1, "step")["outs"] == [loss, g]  # (the worker writes it to a fresh id)


def _accumulating(s: Stream, x: int, old: int) -> CallRecord:
    """A call that adds its gradient to the old one (an argument of the call: ``old``)."""
    rec = s.call(x, zero_grad_outside=True)
    rec.args.append(old)
    acc = s._id()
    rec.instrs.append([OP["add"], acc, [rec.instrs[0][1], old], None, 8])
    rec.freed.update((old, rec.instrs[0][1]))  # (replaced as the tensor's .grad; a temporary)
    rec.made[acc] = len(rec.instrs) - 1
    rec.grads, rec.grad_args = {acc: old}, [old]
    return rec


def test_an_accumulated_gradient_is_written_over_the_old_one_its_argument():
    s = Stream()
    b = _accumulating(s, 20, 7)
    c = _accumulating(s, 30, b.instrs[-1][1])
    old = c.args[1]
    tpl = build_template(c, b)
    assert tpl.inputs == [30, old] and tpl.grad_inputs == [old] and tpl.rebound == []
    assert c.instrs[-1][1] not in tpl.kept
    assert tpl.steps[-1][1] == old and tpl.steps[-1][2] == [c.instrs[0][1], old]


def test_a_gradient_made_after_zero_grad_inside_is_written_over_the_one_held_then():
    s = Stream()
    s.call(10)
    b = s.call(20)
    c = s.call(30)  # (frees b's g, as zero_grad() does, and makes its own)
    g = c.instrs[0][1]
    c.grads = {g: b.instrs[0][1]}
    tpl = build_template(c, b)
    assert tpl.kept == [] and tpl.inputs == [30, b.instrs[0][1]]
    assert tpl.grad_inputs == [b.instrs[0][1]] and tpl.steps[0][1] == b.instrs[0][1]


def test_an_old_gradient_used_after_it_was_replaced_is_refused():
    s = Stream()
    b = _accumulating(s, 20, 7)
    c = _accumulating(s, 30, b.instrs[-1][1])
    c.instrs.append([OP["neg"], s._id(), [c.args[1]], None, 9])
    with pytest.raises(NotCapturable, match="old gradient after backward replaced"):
        build_template(c, b)
    c.instrs.pop()
    c.freed.discard(c.args[1])  # (something else still holds it)
    with pytest.raises(NotCapturable, match="keeps a tensor's old gradient"):
        build_template(c, b)


@pytest.mark.parametrize(
    ("op", "why"),
    [("fetch", "sync point"), ("upload", "data from the host")],
)
def test_sync_points_and_host_data_cannot_be_replayed(op, why):
    s = Stream()
    rec = s.call(10)
    rec.instrs.append([OP[op], 999, [], {"shape": [1], "dtype": "float32", "buf": 0}, 9])
    with pytest.raises(NotCapturable, match=why):
        canonical(rec, None)


def test_an_instruction_under_a_signal_is_captured_only_while_no_config_places_it():
    rec = Stream().call(10)
    rec.instrs[0] = [*rec.instrs[0], 3]  # a signal id
    with pytest.raises(NotCapturable, match="signal while a shard config is in force"):
        canonical(rec, None)
    assert canonical(rec, None, signals_ok=True)  # (with no config, a signal changes nothing)


def test_a_result_the_call_did_not_make_is_refused():
    s = Stream()
    b = s.call(20)
    c = s.call(30)
    c.returned = [W]
    with pytest.raises(NotCapturable, match="did not make"):
        build_template(c, b)


def test_freeing_a_tensor_from_outside_the_step_is_refused():
    s = Stream()
    b = s.call(20)
    c = s.call(30)
    c.freed.add(B)
    with pytest.raises(NotCapturable, match="frees a tensor from outside"):
        build_template(c, b)


def test_comparing_is_linear_in_the_length_of_the_calls():
    # 20,000-instruction calls compare in one pass (no quadratic matching)
    def long_call(lo: int, x: int) -> CallRecord:
        rec = CallRecord(lo, [x])
        prev = x
        for k in range(20_000):
            rec.instrs.append([OP["add"], lo + k, [prev, 1.0], None, 1])
            prev = lo + k
        rec.close()
        return rec

    a, b = long_call(1000, 1), long_call(100_000, 2)
    assert same_step(canonical(a, None), canonical(b, None))
