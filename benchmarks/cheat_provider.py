"""`python -m benchmarks.cheat_provider STRATEGY <proofnet args>`: a cheating provider.

It is the product's own worker (`proofnet worker run ...`, every flag as documented), but
the harness library it hands its jobs is bent under STRATEGY
(`benchmarks.cheat_harness.install_bent_library`): the job runs, uploads and is attested
as an honest one would be, from the proof the bent harness wrote. The worker finds its
library through `worker.harness.provide_library`, which is all this process replaces.

Under `SPOOF_GPU` it is the product's worker on a machine that lies about its GPU instead
(`spoof_gpu`): NVML (`pynvml`, the worker's one source of GPUs) answers with an H100 it does
not have, and the challenge products the worker computes "on that GPU" are computed on the
CPU with numpy and labelled as the H100's (its own report's timing made up to match). The
API's round is untouched: the API issues the seed and times the round trip on its own clock.

Under `IDLE_LEASE` it is a rate-card provider whose one GPU is an L4 as NVML here says (the
CPU stands in for it, the job runs on the process runtime; `pad_gpu`), and whose harness
holds the lease idle for `IDLE_S` before it trains: the worker meters and attests that time
as GPU time, the lease's clock agreeing (`benchmarks.cheat_harness.bent_train`).
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

SPOOF_GPU = "spoofed_gpu_model_cpu_claims_h100"
SPOOFED_MODEL = "NVIDIA H100 80GB HBM3"
SPOOFED_UUID = "GPU-5f3c1a2e-7b4d-4e1f-9a2b-0c1d2e3f4a5b"
# What the spoofer writes in its own report as the product's time: an H100's at 40 TFLOP/s.
SPOOFED_TFLOPS = 40.0
PADDED_MODEL = "NVIDIA L4"
PADDED_UUID = "GPU-0b7e2d41-3c5a-4f69-8e12-7d9c4b3a2f10"
# An honest verify-only worker with an L4 of its own (the CPU standing in for it, as for the
# padder): a GPU job's proof is replayed only by workers with the GPU model it was made on,
# so without it no verifier could be drawn for the padder's job and it would stay received.
L4_VERIFIER = "honest_verifier_on_an_l4"
L4_VERIFIER_UUID = "GPU-6a1f0c93-2d7e-4b58-9c3a-1e8f7d6b5c42"
# The resume phase's two providers: one L40S 48GB each (a GPU job the others cannot take).
RESUME_MODEL = "NVIDIA L40S"
RESUME_UUIDS = {
    "lost_attempt": "GPU-6a1f0c3e-2d4b-4c8a-9f7e-1b2c3d4e5f60",
    "resume_from_forged_checkpoint": "GPU-7b2e1d4f-3e5c-4d9b-8a6f-2c3d4e5f6071",
}


class _NvmlError(Exception):
    def __init__(self, value: int = 3) -> None:  # NVML_ERROR_NOT_SUPPORTED
        super().__init__(f"NVML error {value}")
        self.value = value


def _fake_pynvml(model: str, uuid: str, memory_gb: int) -> types.ModuleType:
    """A `pynvml` that reports one GPU `model` (nothing else it is asked is supported)."""
    nvml: Any = types.ModuleType("pynvml")
    nvml.NVMLError = _NvmlError
    nvml.NVML_SUCCESS = 0
    nvml.NVML_ERROR_NOT_SUPPORTED = 3
    nvml.NVML_TEMPERATURE_GPU = 0
    nvml.nvmlInit = lambda: None
    nvml.nvmlShutdown = lambda: None
    nvml.nvmlSystemGetDriverVersion = lambda: "550.54.15"
    nvml.nvmlSystemGetCudaDriverVersion = lambda: 12040
    nvml.nvmlDeviceGetCount = lambda: 1
    nvml.nvmlDeviceGetHandleByIndex = lambda i: ("gpu", i)
    nvml.nvmlDeviceGetName = lambda h: model
    nvml.nvmlDeviceGetUUID = lambda h: uuid
    nvml.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(
        total=memory_gb * 2**30, free=memory_gb * 2**30, used=0
    )
    nvml.nvmlDeviceGetCudaComputeCapability = lambda h: (9, 0)
    nvml.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=b"00000000:18:00.0")
    nvml.nvmlDeviceGetEnforcedPowerLimit = lambda h: 700_000

    def unsupported(name: str) -> Any:
        if name.startswith("nvml"):

            def call(*_args: Any) -> Any:
                raise _NvmlError(3)

            return call
        raise AttributeError(name)

    nvml.__getattr__ = unsupported
    return nvml


def spoof_gpu() -> None:
    """Swap the GPU source and the challenge's device for the lie (see the module doc)."""
    import dataclasses

    sys.modules["pynvml"] = _fake_pynvml(SPOOFED_MODEL, SPOOFED_UUID, 80)
    from worker import api_challenge, challenge

    honest = challenge.run_challenge

    def on_the_cpu(spec: Any, **kwargs: Any) -> Any:
        kwargs.pop("backend", None)
        kwargs.pop("gpu_index", None)
        uuid = kwargs.pop("gpu_uuid", None)
        result = honest(spec, backend="numpy", **kwargs)
        return dataclasses.replace(
            result,
            backend="torch",
            device=f"cuda:0 {SPOOFED_MODEL}",
            device_uuid=uuid,
            elapsed_s=spec.flops / (SPOOFED_TFLOPS * 1e12),
        )

    challenge.run_challenge = on_the_cpu  # type: ignore[assignment]
    api_challenge.run_challenge = on_the_cpu  # type: ignore[assignment]


def pad_gpu() -> None:
    """An L4 in NVML (see the module doc)."""
    sys.modules["pynvml"] = _fake_pynvml(PADDED_MODEL, PADDED_UUID, 24)


def main(argv: list[str]) -> int:
    strategy, *rest = argv
    if strategy == SPOOF_GPU:
        spoof_gpu()
    elif strategy == L4_VERIFIER:
        sys.modules["pynvml"] = _fake_pynvml(PADDED_MODEL, L4_VERIFIER_UUID, 24)
    else:
        from benchmarks.cheat_harness import IDLE_LEASE, install_bent_library
        from worker import harness

        if strategy == IDLE_LEASE:
            pad_gpu()
        elif strategy in RESUME_UUIDS:
            sys.modules["pynvml"] = _fake_pynvml(RESUME_MODEL, RESUME_UUIDS[strategy], 48)

        honest = harness.provide_library

        def bent(root: Path) -> Path:
            return install_bent_library(honest(root), Path(root) / "bent", strategy)

        harness.provide_library = bent  # type: ignore[assignment]
    from proofnet.cli import app

    app(rest, prog_name="proofnet")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
