"""Where jobs run: the Runtime interface, the Docker runtime and the unisolated process one."""

from worker.runtime.base import (
    EngineUnavailable,
    GpuRuntimeUnavailable,
    ImageMismatch,
    ImageUnavailable,
    InvalidRunSpec,
    JobStartFailed,
    LimitsUnenforceable,
    LogLine,
    PullProgress,
    Resources,
    RunHandle,
    RunReason,
    RunResult,
    RunSpec,
    Runtime,
    RuntimeErrorBase,
)

__all__ = [
    "EngineUnavailable",
    "GpuRuntimeUnavailable",
    "ImageMismatch",
    "ImageUnavailable",
    "InvalidRunSpec",
    "JobStartFailed",
    "LimitsUnenforceable",
    "LogLine",
    "PullProgress",
    "Resources",
    "RunHandle",
    "RunReason",
    "RunResult",
    "RunSpec",
    "Runtime",
    "RuntimeErrorBase",
]
