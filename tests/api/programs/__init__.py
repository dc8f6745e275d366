"""Realistic PyTorch programs, each written once against a library module (``torch`` or ``gt``).

A program is ``def name(torch) -> dict``: it builds its inputs with NumPy from a fixed seed, uses
only ``torch.*`` (``torch.nn``, ``torch.optim``, ``torch.nn.functional`` ...), and returns named
results (tensors, numbers, strings, lists or dicts of them). ``scripts/make_golden.py`` runs every
program with PyTorch and stores the results in ``tests/api/golden/``; the test suite runs them with
GT and compares. Nothing here imports either library.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

#: The modules that hold programs (one golden file each).
MODULES = (
    "fits",
    "classifiers",
    "charmodels",
    "models",
    "attention",
    "rl",
    "convnets",
    "schedulers",
    "checkpoints",
    "edges",
    "apis",
    "printing",
    "recurrent",
    "gradients",
    "numerics",
    "custom_functions",
    "optimizers",
    "volumes",
    "linear_algebra",
    "distributions",
    "layers_more",
    "special_functions",
    "gamma_family",
    "spatial",
    "math_more",
    "linalg_more",
    "tensor_api_more",
    "nn_more",
    "utils_more",
    "distributions_more",
    "autograd_functional",
    "func_transforms",
    "data_more",
    "checkpointing",
    "torch_functions",
    "nn_remaining",
    "distributions_last",
    "scripts_compat",
    "swa_prune",
    "complex_fft",
    "generative",
    "transformers_more",
    "vision_more",
    "graphs_sequences",
    "audio_speech",
    "rl_more",
    "scientific",
    "nlp_training",
    "tabular_timeseries",
    "training_utils",
    "detection_segmentation",
    "metric_learning",
    "meta_learning",
    "point_clouds",
    "classical_ml",
    "quantization",
    "torch_aliases",
    "linalg_special_more",
    "llm_inference",
    "vision_libraries",
    "sequence_models",
    "module_api",
    "probabilistic",
    "inplace_algorithms",
    "custom_optimizers",
    "differentiable_physics",
    "attention_variants",
    "tutorials",
    "numerical_edge_cases",
    "indexing_puzzles",
    "dtype_semantics",
    "recommender_systems",
    "self_supervised",
    "gnn_layers",
    "diffusion_models",
    "image_processing",
    "tensor_decompositions",
    "peft_finetuning",
    "optical_flow_stereo",
    "quant_finance",
    "geometry_3d",
    "bayesian_uncertainty",
    "adversarial_robustness",
    "continual_distillation",
    "ranking_transport",
    "neural_odes_implicit",
    "gan_style",
    "mixed_precision",
    "mixed_precision_recipes",
    "medical_segmentation",
    "survival_statistics",
    "video_models",
    "nlp_classic",
    "timeseries_deep",
    "rl_offline_model_based",
    "compression_equivariance",
    "mixture_of_experts",
    "scientific_ml",
    "memory_routing_nets",
    "implicit_neural_fields",
    "flows_energy_scores",
    "causal_inference",
    "contrastive_multimodal",
    "optimizer_research",
    "robotics_control",
    "state_space_models",
    "gaussian_processes",
    "quantum_simulation",
    "molecular_ml",
    "federated_privacy",
    "ddsp_audio",
    "knowledge_graphs",
    "signal_comms",
    "trajectory_forecasting",
    "bioinformatics",
    "hypernetworks_nas",
    "vector_retrieval",
    "epidemiology_systems",
    "interpretability",
    "weather_climate",
    "document_ocr",
    "multitask_learning",
    "makemore_manual_backprop",
    "cellular_lattice",
    "blackbox_evolution",
    "integer_bit_algorithms",
)


@dataclass(frozen=True)
class Program:
    """One program and how closely GT's results must match PyTorch's."""

    name: str
    module: str
    fn: Callable[[Any], dict]
    rtol: float
    atol: float


PROGRAMS: dict[str, Program] = {}


def program(fn: Callable | None = None, *, rtol: float = 2e-4, atol: float = 2e-5) -> Any:
    """Register a program (as ``@program`` or ``@program(rtol=..., atol=...)``)."""

    def register(f: Callable) -> Callable:
        module = f.__module__.rsplit(".", 1)[-1]
        if f.__name__ in PROGRAMS:
            raise ValueError(f"two programs are named {f.__name__}")
        PROGRAMS[f.__name__] = Program(f.__name__, module, f, rtol, atol)
        return f

    return register(fn) if fn is not None else register


def load_all() -> dict[str, Program]:
    """Import every program module; returns the registry."""
    for m in MODULES:
        importlib.import_module(f"{__name__}.{m}")
    return PROGRAMS


def to_numpy(value: Any) -> np.ndarray:
    """A result as a NumPy array (tensors of either library, numbers, bools, strings)."""
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        v = value.detach()
        v = v.cpu() if hasattr(v, "cpu") else v
        v = (
            v.resolve_conj().resolve_neg() if hasattr(v, "resolve_conj") else v
        )  # (PyTorch's lazy bits)
        return np.asarray(v.numpy())
    if isinstance(value, str):
        return np.array(value)
    if value is None:
        return np.array("None")
    return np.asarray(value)


def flatten(results: dict, prefix: str = "") -> dict[str, np.ndarray]:
    """``{"loss": [t0, t1], "grads": {"w": g}}`` -> ``{"loss[0]": .., "loss[1]": .., "grads.w": ..}``."""
    out: dict[str, np.ndarray] = {}
    for key, value in results.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        elif isinstance(value, (list, tuple)) and not _is_plain_numbers(value):
            for i, v in enumerate(value):
                out.update(flatten({f"[{i}]": v}, name))
        else:
            out[name] = to_numpy(value)
    return out


def _is_plain_numbers(value: Any) -> bool:
    return all(isinstance(v, (bool, int, float)) for v in value) and len(value) > 0


def run(prog: Program, lib: Any) -> dict[str, np.ndarray]:
    """Run one program with ``lib`` and flatten its results."""
    return flatten(prog.fn(lib))
