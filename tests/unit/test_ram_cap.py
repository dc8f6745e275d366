"""A NumPy worker's RAM cap (gt.runtime.worker.ram_cap): the machine's RAM as a container sees it,
the cap a setting gives, what the process has mapped, and the kernel's limit once set."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from gt.runtime.env_checks import MIN_RAM_CAP
from gt.runtime.memory_settings import SettingError
from gt.runtime.worker.ram_cap import cap_bytes, cgroup_limit, data_in_use

GB = 10**9


def _files(**by_path: str):
    return lambda path: by_path.get(path)


def test_a_v2_cgroup_limit_is_the_smallest_of_the_group_and_its_ancestors():
    read = _files(**{
        "/sys/fs/cgroup/user.slice/job/memory.max": "max\n",
        "/sys/fs/cgroup/user.slice/memory.max": "8000000000\n",
        "/sys/fs/cgroup/memory.max": "12000000000\n",
    })  # fmt: skip
    assert cgroup_limit("0::/user.slice/job\n", read) == 8 * GB


def test_a_v1_memory_cgroup_limit_is_read_and_an_unlimited_one_is_none():
    proc = "12:cpu,cpuacct:/x\n9:memory:/docker/abc\n1:name=systemd:/docker/abc\n"
    limited = _files(**{"/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "2147483648\n"})
    assert cgroup_limit(proc, limited) == 2147483648
    unlimited = _files(**{"/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes":
                          "9223372036854771712\n"})  # fmt: skip
    assert cgroup_limit(proc, unlimited) is None


def test_a_container_that_mounts_its_own_group_as_the_root_is_read_there():
    # (inside a container /proc/self/cgroup names the host's path; only the root file exists)
    read = _files(**{"/sys/fs/cgroup/memory.max": "4000000000"})
    assert cgroup_limit("0::/kubepods/pod1/ctr\n", read) == 4 * GB


def test_no_cgroup_file_means_no_limit():
    assert cgroup_limit("0::/\n", _files()) is None
    assert cgroup_limit(None, _files()) is None
    assert cgroup_limit("garbage", _files()) is None


def test_the_default_cap_is_nine_tenths_of_the_workers_share():
    assert cap_bytes(None, 20 * GB) == 18 * GB
    assert cap_bytes("", 20 * GB, sharing=2) == 9 * GB
    assert cap_bytes("0.5", 20 * GB, sharing=4) == int(2.5 * GB)
    assert cap_bytes(None, None) is None  # (RAM unknown: no cap rather than a wrong one)


def test_a_size_is_taken_as_it_is_and_off_means_no_cap():
    assert cap_bytes("3GB", 20 * GB, sharing=8) == 3 * GB
    assert cap_bytes("off", 20 * GB) is None
    assert cap_bytes("0", 20 * GB) is None


def test_a_setting_that_does_not_parse_names_the_variable():
    with pytest.raises(SettingError, match="GT_RAM_CAP"):
        cap_bytes("lots", 20 * GB)


def test_a_size_too_small_for_the_worker_itself_is_refused_and_a_fraction_is_raised_to_it():
    with pytest.raises(SettingError, match="below what a worker needs to start"):
        cap_bytes("100MB", 20 * GB)
    assert cap_bytes("0.1", 1 * GB, sharing=4) == MIN_RAM_CAP  # (a tiny share: the floor)


def test_data_in_use_reads_vmdata_in_bytes():
    status = "Name:\tpython\nVmPeak:\t  999 kB\nVmData:\t  204800 kB\nVmStk:\t 132 kB\n"
    assert data_in_use(status) == 204800 * 1024
    assert data_in_use("Name:\tx\n") is None
    assert data_in_use() > 0  # (this process, on Linux)


def test_the_cap_makes_the_kernel_refuse_an_allocation_past_it_and_not_a_small_one():
    # (in a child process: the limit stays with the process that sets it)
    code = textwrap.dedent("""
        import numpy as np
        from gt.runtime.worker.ram_cap import apply_cap, data_in_use
        cap = data_in_use() + 200_000_000
        assert apply_cap(cap) == cap
        try:
            np.ones(300_000_000, np.uint8)
            print("allocated")
        except MemoryError:
            print("refused", np.ones(1000).sum())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["refused", "1000.0"]
