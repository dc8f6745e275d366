"""Four client processes at once, interleaving work on one dispatcher, each with exact results."""

from __future__ import annotations

import subprocess
import sys
import textwrap

CLIENT = textwrap.dedent("""
    import sys
    import numpy as np
    import gt

    k = int(sys.argv[1])
    gt.connect(sys.argv[2], timeout=60)
    rng = np.random.default_rng(k)
    a_np = rng.integers(-5, 5, size=(64, 64)).astype(np.float64)
    a = gt.from_numpy(a_np)
    acc = gt.zeros(64, 64, dtype="float64")
    acc_np = np.zeros((64, 64))
    for step in range(300):
        acc = acc + a * (k + 1) - step
        acc_np = acc_np + a_np * (k + 1) - step
        if step % 50 == 0:
            s = (acc @ a).sum().item()
            assert s == (acc_np @ a_np).sum(), (k, step)
    np.testing.assert_array_equal(acc.numpy(), acc_np)
    print(f"client {k} ok {acc.sum().item():.0f}")
""")


def test_four_clients_interleave_with_exact_results(cluster, tmp_path):
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(k), cluster.address],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(4)
    ]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=90)
            outs.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for k, (code, out, err) in enumerate(outs):
        assert code == 0, err
        assert out.startswith(f"client {k} ok")
