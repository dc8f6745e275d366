"""Commands that pick a dispatcher by themselves say which one, and nobody changes another user's.

A cluster of its own, with its discovery file in a runtime directory of its own, so "the newest
dispatcher" is this one whatever else runs on the machine.
"""

from __future__ import annotations

import os
import time

import pytest

from gt.cli import main
from gt.cli.common import describe_dispatcher
from gt.runtime.control import request
from gt.runtime.launch import LocalCluster
from gt.tui import config_view as CV

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
    """``(cluster, its ping answer)``, the only dispatcher in ``$GT_RUNTIME_DIR``."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GT_RUNTIME_DIR", str(tmp_path_factory.mktemp("alone")))
        with LocalCluster(workers=1) as c:
            yield c, request(c.address, "ping")


def test_ping_and_endpoints_say_who_started_the_dispatcher_and_when(alone):
    cluster, ping = alone
    assert ping["uid"] == os.getuid() and ping["pid"] == cluster.proc.pid
    assert abs(ping["started"] - time.time()) < 600
    eps = request(cluster.address, "endpoints")
    assert eps["front"] == cluster.address and eps["uid"] == os.getuid()
    assert eps["started"] == ping["started"]


def test_describe_names_address_pid_start_time_and_a_foreign_user():
    started = time.time() - 90
    line = describe_dispatcher({"front": "tcp://h:1", "pid": 42, "started": started})
    assert line.startswith("the dispatcher at tcp://h:1 (pid 42, started ")
    assert time.strftime("%H:%M", time.localtime(started)) in line and "1m30s ago" in line
    assert "not you" not in line
    other = describe_dispatcher({"front": "tcp://h:1", "uid": os.getuid() + 1})
    assert "not you" in other


@pytest.mark.parametrize(
    "argv",
    [["top", "--once", "--wait", "0.1"], ["config", "show"], ["record", "--duration", "0.1"]],
)
def test_commands_that_pick_a_dispatcher_say_which_on_stderr(alone, argv, tmp_path, capsys):
    cluster, ping = alone
    if argv[0] == "record":
        argv = [*argv, "-o", str(tmp_path / "r.gtrace"), "--quiet"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"using the dispatcher at {cluster.address} (pid {ping['pid']}, started " in err


def test_naming_the_dispatcher_needs_no_announcement(alone, capsys):
    cluster, _ = alone
    assert main(["config", "show", "--connect", cluster.address]) == 0
    assert "using the dispatcher" not in capsys.readouterr().err


def test_owner_refusal_only_for_another_local_user_without_a_token():
    me = os.getuid()
    assert CV.owner_refusal(me, "ipc:///tmp/x", None) is None
    why = CV.owner_refusal(me + 1, "tcp://127.0.0.1:5555", None)
    assert why is not None and "not by you" in why
    assert CV.owner_refusal(me + 1, "tcp://127.0.0.1:5555", "s3cret") is None  # their permission
    assert CV.owner_refusal(me + 1, "tcp://10.255.255.1:5555", None) is None  # the token guards it
    assert CV.owner_refusal(None, "tcp://127.0.0.1:5555", None) is None  # an older dispatcher


def test_config_apply_refuses_a_dispatcher_another_user_started(alone, tmp_path, capsys):
    cluster, ping = alone
    good = tmp_path / "good.yaml"
    good.write_text("rows:\n  shard: {axis: 0}\n")
    before = request(cluster.address, "config_get")
    with pytest.MonkeyPatch.context() as mp:
        # we pretend to be someone else: the dispatcher's uid is then another user's
        mp.setattr(CV.os, "getuid", lambda: ping["uid"] + 1)
        assert main(["config", "apply", str(good)]) == 1
    err = capsys.readouterr().err
    assert "not applied" in err and "not by you" in err
    assert request(cluster.address, "config_get") == before
    assert main(["config", "apply", str(good)]) == 0  # its own user may
