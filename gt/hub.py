"""``gt.hub``: PyTorch's ``torch.hub`` for files: the cache directory, downloads checked by hash,
``load_state_dict_from_url`` (read with ``gt.load``) and ``load(dir, model, source="local")``.

Models from GitHub repositories (``list``, ``help``, ``load`` with ``source="github"``) are not
supported: their ``hubconf.py`` builds PyTorch modules, which GT cannot run.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import hashlib
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse
from urllib.request import Request, urlopen

from gt.serialization import load as _gt_load

__all__ = ["download_url_to_file", "get_dir", "help", "list", "load", "load_state_dict_from_url",
           "set_dir"]  # fmt: skip

# matches bfd8deac from resnet18-bfd8deac.pth
HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")
ENV_TORCH_HOME = "TORCH_HOME"
ENV_XDG_CACHE_HOME = "XDG_CACHE_HOME"
DEFAULT_CACHE_DIR = "~/.cache"
MODULE_HUBCONF = "hubconf.py"
READ_DATA_CHUNK = 128 * 1024

_hub_dir: str | None = None


def _get_torch_home() -> str:
    return os.path.expanduser(
        os.getenv(
            ENV_TORCH_HOME, os.path.join(os.getenv(ENV_XDG_CACHE_HOME, DEFAULT_CACHE_DIR), "torch")
        )  # fmt: skip
    )


def get_dir() -> str:
    """The hub's cache directory: what :func:`set_dir` set, else ``$TORCH_HOME/hub``
    (``$TORCH_HOME`` defaults to ``$XDG_CACHE_HOME/torch``, that to ``~/.cache``), as PyTorch's,
    so both share downloaded weights."""
    if os.getenv("TORCH_HUB"):
        warnings.warn("TORCH_HUB is deprecated, please use env TORCH_HOME instead", stacklevel=2)
    if _hub_dir is not None:
        return _hub_dir
    return os.path.join(_get_torch_home(), "hub")


def set_dir(d: str | os.PathLike) -> None:
    """Set the hub's cache directory."""
    global _hub_dir
    _hub_dir = os.path.expanduser(d)


def download_url_to_file(url: str, dst: str, hash_prefix: str | None = None,
                         progress: bool = True) -> None:  # fmt: skip
    """Download ``url`` to the path ``dst`` (through a temporary file beside it, moved into place
    when complete). With ``hash_prefix``, the file's SHA256 must start with it, else RuntimeError
    and nothing is written; ``progress`` shows the bytes received on stderr."""
    dst = os.path.expanduser(dst)
    for _ in range(tempfile.TMP_MAX):
        tmp_dst = dst + "." + uuid.uuid4().hex + ".partial"
        try:
            f = open(tmp_dst, "w+b")  # noqa: SIM115
        except FileExistsError:
            continue
        break
    else:
        raise FileExistsError(errno.EEXIST, "No usable temporary file name found")
    req = Request(url, headers={"User-Agent": "torch.hub"})
    try:
        with urlopen(req) as u:
            length = u.info().get_all("Content-Length")
            file_size = int(length[0]) if length else None
            sha256 = hashlib.sha256() if hash_prefix is not None else None
            done = 0
            while True:
                buffer = u.read(READ_DATA_CHUNK)
                if len(buffer) == 0:
                    break
                f.write(buffer)
                if sha256 is not None:
                    sha256.update(buffer)
                done += len(buffer)
                if progress:
                    total = f"/{file_size}" if file_size is not None else ""
                    sys.stderr.write(f"\r{done}{total} B")
            if progress:
                sys.stderr.write("\n")
            f.close()
            if sha256 is not None and hash_prefix is not None:
                digest = sha256.hexdigest()
                if digest[: len(hash_prefix)] != hash_prefix:
                    raise RuntimeError(
                        f'invalid hash value (expected "{hash_prefix}", got "{digest}")'
                    )
        shutil.move(f.name, dst)
    finally:
        f.close()
        if os.path.exists(f.name):
            os.remove(f.name)


def load_state_dict_from_url(url: str, model_dir: str | None = None, map_location: Any = None,
                             progress: bool = True, check_hash: bool = False,
                             file_name: str | None = None, weights_only: bool = False) -> Any:  # fmt: skip
    """What ``gt.save`` wrote at ``url``, read with ``gt.load``: downloaded into ``model_dir``
    (``get_dir()/checkpoints`` by default) unless the file is there already. With
    ``check_hash``, the name's ``-<sha256 prefix>.`` part must match the contents. (Files that
    PyTorch's ``torch.save`` wrote are PyTorch's format, which ``gt.load`` does not read.)"""
    if os.getenv("TORCH_MODEL_ZOO"):
        warnings.warn("TORCH_MODEL_ZOO is deprecated, please use env TORCH_HOME instead",
                      stacklevel=2)  # fmt: skip
    if model_dir is None:
        model_dir = os.path.join(get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)
    filename = os.path.basename(urlparse(url).path)
    if file_name is not None:
        filename = file_name
    cached_file = os.path.join(model_dir, filename)
    if not os.path.exists(cached_file):
        sys.stdout.write(f'Downloading: "{url}" to {cached_file}\n')
        hash_prefix = None
        if check_hash:
            r = HASH_REGEX.search(filename)
            hash_prefix = r.group(1) if r else None
        download_url_to_file(url, cached_file, hash_prefix, progress=progress)
    return _gt_load(cached_file, map_location=map_location, weights_only=weights_only)


def _github_unsupported(what: str) -> NotImplementedError:
    return NotImplementedError(
        f"gt.hub.{what}: models from GitHub repositories are not supported (their hubconf.py "
        "builds PyTorch modules); download weights with gt.hub.load_state_dict_from_url, or use "
        'gt.hub.load(a_local_dir, model, source="local")'
    )


def list(github: str, force_reload: bool = False, skip_validation: bool = False,  # noqa: A001
         trust_repo: Any = "check", verbose: bool = True) -> builtins.list[str]:  # fmt: skip
    """Not supported (GitHub repositories): raises NotImplementedError."""
    raise _github_unsupported("list")


def help(github: str, model: str, force_reload: bool = False, skip_validation: bool = False,  # noqa: A001
         trust_repo: Any = "check") -> str:  # fmt: skip
    """Not supported (GitHub repositories): raises NotImplementedError."""
    raise _github_unsupported("help")


@contextlib.contextmanager
def _add_to_sys_path(path: str) -> Iterator[None]:
    sys.path.insert(0, path)
    try:
        yield
    finally:
        sys.path.remove(path)


def load(repo_or_dir: str, model: str, *args: Any, source: str = "github",
         trust_repo: Any = "check", force_reload: bool = False, verbose: bool = True,
         skip_validation: bool = False, **kwargs: Any) -> Any:  # fmt: skip
    """``model(*args, **kwargs)``, the entry point of ``hubconf.py`` in the local directory
    ``repo_or_dir`` (``source="local"``); ``source="github"`` is not supported."""
    source = source.lower()
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    if source == "github":
        raise _github_unsupported("load")
    with _add_to_sys_path(repo_or_dir):
        spec = importlib.util.spec_from_file_location(
            MODULE_HUBCONF, os.path.join(repo_or_dir, MODULE_HUBCONF)
        )
        if spec is None or spec.loader is None:
            raise AssertionError(f"failed to load spec from {repo_or_dir}")
        hub_module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(hub_module)
        missing = [d for d in getattr(hub_module, "dependencies", [])
                   if importlib.util.find_spec(d) is None]  # fmt: skip
        if missing:
            raise RuntimeError(f"Missing dependencies: {', '.join(missing)}")
        if not isinstance(model, str):
            raise ValueError("Invalid input: model should be a string of function name")
        entry = getattr(hub_module, model, None)
        if entry is None or not callable(entry):
            raise RuntimeError(f"Cannot find callable {model} in hubconf")
        return entry(*args, **kwargs)
