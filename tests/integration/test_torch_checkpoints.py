"""Checkpoints in PyTorch's format: ``gt.load`` reads files ``torch.save`` wrote (committed, made by
``scripts/make_torch_checkpoints.py`` with torch 2.13), and ``gt.save`` writes the same format
(its structure checked here; that ``torch.load`` reads it, by that script's ``--check``)."""

from __future__ import annotations

import io
import pickle
import pickletools
import zipfile
from pathlib import Path

import numpy as np
import pytest
from helpers import each_backend_cluster

import gt

pytestmark = pytest.mark.timeout(90)

cluster = each_backend_cluster(workers=1)

FILES = Path(__file__).resolve().parents[1] / "support" / "torch_checkpoints"


def _weights(i: int, shape: tuple) -> np.ndarray:
    """The script's parameter values: ``arange / 10 - i`` in float32."""
    return (np.arange(np.prod(shape), dtype=np.float32).reshape(shape) / 10 - i).astype(np.float32)


def test_a_pytorch_checkpoint_loads_with_every_dtype_and_layout(conn):
    saved = gt.load(FILES / "mixed.pt")
    sd = saved["state_dict"]
    assert list(sd) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    for i, (name, shape) in enumerate([("0.weight", (4, 3)), ("0.bias", (4,)),
                                       ("2.weight", (2, 4)), ("2.bias", (2,))]):  # fmt: skip
        assert sd[name].dtype == gt.float32 and not sd[name].requires_grad
        np.testing.assert_array_equal(sd[name].numpy(), _weights(i, shape))
    assert sd._metadata[""] == {"version": 1}  # (the module versions PyTorch keeps)
    assert saved["float16"].dtype == gt.float16 and saved["float16"].tolist() == [
        0,
        0.25,
        0.5,
        0.75,
        1,
    ]
    assert saved["int8"].tolist() == [-3, -2, -1, 0, 1, 2] and saved["int8"].dtype == gt.int8
    assert saved["uint8"].tolist() == [250, 251, 252, 253, 254, 255]
    assert saved["int64"].tolist() == [0, 2**40, 2**41, 3 * 2**40]
    assert saved["uint16"].dtype == gt.uint16 and saved["uint16"].tolist() == [1, 65535]
    assert saved["bool"].tolist() == [True, False, True]
    assert saved["complex64"].tolist() == [1 + 2j, -0.5j]
    assert saved["scalar"].shape == () and saved["scalar"].item() == 2.5
    assert saved["empty"].shape == (0, 3)
    base = np.arange(12.0)
    assert saved["transposed"].tolist() == base.reshape(3, 4).T.tolist()  # (strides followed)
    assert saved["slice"].tolist() == [2.0, 5.0, 8.0]  # (a storage offset and a step)
    assert type(saved["parameter"]) is gt.nn.Parameter and saved["parameter"].requires_grad
    assert saved["needs_grad"].requires_grad and saved["needs_grad"].is_leaf
    assert saved["sparse"].is_sparse and saved["sparse"].is_coalesced()
    assert saved["sparse"].to_dense().tolist() == [[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]
    assert (
        saved["csr"].layout == gt.sparse_csr
        and saved["csr"].to_dense().tolist() == np.eye(3).tolist()
    )
    assert saved["size"] == gt.Size([2, 3]) and isinstance(saved["size"], gt.Size)
    assert saved["dtype"] is gt.float16 and saved["device"] == gt.device("cpu")
    assert saved["python"] == {"step": 7, "name": "run-1", "lrs": [0.1, 0.01], "raw": b"\x00\x01"}


def test_bfloat16_loads_where_the_worker_computes_it(conn, request):
    if request.node.callspec.params["cluster"] == "cupy_double":
        pytest.skip("the CuPy test double has no bfloat16")
    values = gt.load(FILES / "bfloat16.pt")["bfloat16"]
    assert values.dtype == gt.bfloat16 and values.float().tolist() == [0, 0.125, 0.25, 0.375, 0.5]


def test_a_whole_pytorch_module_loads_only_when_trusted(conn):
    with pytest.raises(pickle.UnpicklingError, match="torch.nn.modules.container.Sequential"):
        gt.load(FILES / "whole_model.pt")
    model = gt.load(FILES / "whole_model.pt", weights_only=False)
    assert isinstance(model, gt.nn.Sequential) and isinstance(model[0], gt.nn.Linear)
    x = np.ones((1, 3), np.float32)
    hidden = np.maximum(x @ _weights(0, (4, 3)).T + _weights(1, (4,)), 0)
    want = hidden @ _weights(2, (2, 4)).T + _weights(3, (2,))
    np.testing.assert_allclose(model(gt.tensor(x)).detach().numpy(), want, rtol=1e-6)


def test_a_legacy_pytorch_file_is_refused_with_what_to_do(conn):
    with pytest.raises(pickle.UnpicklingError, match="legacy format .* save it again"):
        gt.load(FILES / "legacy.pt", weights_only=False)


def _globals(pkl: bytes) -> set[str]:
    return {arg for op, arg, _ in pickletools.genops(pkl) if op.name == "GLOBAL"}


def test_gt_save_writes_pytorchs_archive(conn, tmp_path):
    model = gt.nn.Linear(3, 2)
    obj = {"sd": model.state_dict(), "p": gt.nn.Parameter(gt.ones(2)),
           "u16": gt.tensor([1, 2], dtype=gt.uint16), "dt": gt.float16, "size": gt.Size([1, 2]),
           "sparse": gt.eye(2).to_sparse()}  # fmt: skip
    path = tmp_path / "ckpt.pt"
    gt.save(obj, path)
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        assert {"archive/data.pkl", "archive/byteorder", "archive/version"} <= set(names)
        assert archive.read("archive/byteorder") == b"little"
        storages = [i for i in archive.infolist() if i.filename.startswith("archive/data/")]
        assert len(storages) == 6 and all(i.compress_type == zipfile.ZIP_STORED for i in storages)
        for info in storages:  # (each storage's bytes start 64-byte aligned, as PyTorch's)
            archive.fp.seek(info.header_offset + 26)
            name_len, extra_len = np.frombuffer(archive.fp.read(4), "<u2")
            assert (info.header_offset + 30 + name_len + extra_len) % 64 == 0
        names_used = _globals(archive.read("archive/data.pkl"))
    assert {"torch._utils _rebuild_tensor_v2", "torch._utils _rebuild_tensor_v3",
            "torch._utils _rebuild_parameter", "torch FloatStorage", "torch uint16",
            "torch float16", "torch Size", "collections OrderedDict",
            "torch._utils _rebuild_sparse_tensor"} <= names_used  # fmt: skip
    assert not any(name.startswith("gt") for name in names_used)
    back = gt.load(path)
    assert back["sd"]["weight"].tolist() == model.weight.tolist()
    assert type(back["p"]) is gt.nn.Parameter and back["u16"].tolist() == [1, 2]
    assert back["dt"] is gt.float16 and back["size"] == (1, 2)
    assert back["sparse"].to_dense().tolist() == [[1.0, 0.0], [0.0, 1.0]]


class Config:
    """A user's class in a checkpoint."""

    def __init__(self, depth: int):
        self.depth = depth


def test_former_gt_files_streams_and_allowed_globals_load(conn):
    old = io.BytesIO()
    gt.save({"w": gt.arange(3.0)}, old, _use_new_zipfile_serialization=False)
    assert old.getvalue()[:1] == b"\x80"  # (a plain pickle)
    assert gt.load(io.BytesIO(old.getvalue()))["w"].tolist() == [0.0, 1.0, 2.0]
    buf = io.BytesIO()
    gt.save({"cfg": Config(3), "w": gt.ones(1)}, buf)

    class Stream(io.RawIOBase):  # (not seekable, as a pipe)
        def __init__(self, data: bytes):
            self._data = io.BytesIO(data)

        def readable(self) -> bool:
            return True

        def readinto(self, b):  # noqa: ANN001
            chunk = self._data.read(len(b))
            b[: len(chunk)] = chunk
            return len(chunk)

    plain = io.BytesIO()  # (protocol 2 names them __builtin__'s; weights_only takes them)
    sparse = gt.tensor([[1.0, 0.0], [0.0, 2.0]]).to_sparse().requires_grad_()
    gt.save({"s": {1, 2}, "c": 1 + 2j, "b": bytearray(b"ab"), "sparse": sparse}, plain)
    back = gt.load(io.BytesIO(plain.getvalue()))
    assert back["s"] == {1, 2} and back["c"] == 1 + 2j and back["b"] == bytearray(b"ab")
    assert not back["sparse"].requires_grad  # (as PyTorch's loaded sparse tensors)
    with pytest.raises(pickle.UnpicklingError, match="add_safe_globals"):
        gt.load(io.BytesIO(buf.getvalue()))
    with gt.serialization.safe_globals([Config]):
        assert gt.load(io.BufferedReader(Stream(buf.getvalue())))["cfg"].depth == 3
    assert gt.serialization.get_safe_globals() == []
