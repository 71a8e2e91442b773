"""The scratch space's lock between verifies (verify/scratch_share.py): shared while a verify's files exist,
exclusive for a verify whose trials need trial groups, and a waiting exclusive holder goes before new verifies."""

from __future__ import annotations

import threading

from kernelwright.deadline import Deadline
from kernelwright.verify.scratch_share import ScratchShare


def _soon() -> Deadline:
    return Deadline.after(1.5)  # a wait that must not end: the holder never lets go within it


def test_verifies_share_the_scratch_space_and_one_that_needs_it_alone_waits_for_the_others(tmp_path):
    a, b = ScratchShare(str(tmp_path)), ScratchShare(str(tmp_path))
    try:
        assert a.share() and b.share()
        assert b.take_alone(_soon()) is None  # a's files are there: the deadline comes first
        assert not b.exclusive
        got: list[bool | None] = []
        waiter = threading.Thread(target=lambda: got.append(b.take_alone()))
        waiter.start()
        waiter.join(0.3)
        assert waiter.is_alive()  # still waiting for a
        a.close()
        waiter.join(30)
        assert got == [True] and b.exclusive  # it waited: the room is worth measuring again
    finally:
        a.close(), b.close()


def test_a_verify_alone_takes_the_scratch_space_without_waiting(tmp_path):
    a = ScratchShare(str(tmp_path))
    try:
        assert a.share()
        assert a.take_alone() is False and a.exclusive  # nobody else: the room it measured stands
        assert a.take_alone() is False  # already alone
    finally:
        a.close()


def test_a_verify_waiting_to_be_alone_goes_before_verifies_that_start_meanwhile(tmp_path):
    a, b, c = (ScratchShare(str(tmp_path)) for _ in range(3))
    try:
        assert a.share() and b.share()
        got: list[bool | None] = []
        waiter = threading.Thread(target=lambda: got.append(b.take_alone()))
        waiter.start()
        waiter.join(0.3)
        assert waiter.is_alive()
        assert c.share(_soon()) is False  # behind the waiting exclusive holder, not beside a
        a.close()
        waiter.join(30)
        assert got == [True]
        assert c.share(_soon()) is False  # b has it alone
        b.close()
        assert c.share(_soon()) is True
    finally:
        a.close(), b.close(), c.close()


def test_a_verify_that_ends_lets_go(tmp_path):
    a, b = ScratchShare(str(tmp_path)), ScratchShare(str(tmp_path))
    try:
        assert a.share() and a.take_alone() is False
        a.close()
        assert b.share(_soon()) is True
    finally:
        a.close(), b.close()


def test_an_unwritable_scratch_folder_means_no_lock_not_an_error(tmp_path):
    share = ScratchShare(str(tmp_path / "missing"))
    assert share.rw < 0 and share.share() and share.take_alone() is False
    share.close()
