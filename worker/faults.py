"""Whose fault a failed job is: the job's own, or the provider's machine.

A job whose code, data or image is wrong fails, and the failure counts against the job's
attempts. A machine that cannot run any job right now (its work dir or git mirror cache is
unusable, its disk is full, git or the container engine is missing, the GPU runtime is
broken) is not the job's fault: the worker hands the lease back without counting it, tells
the provider what to fix, and waits before it claims again. Errors that mean "this machine"
derive from `HostFault`, wherever they are raised (workspace, runtime).
"""

from __future__ import annotations


class HostFault(Exception):
    """This machine cannot run jobs right now; the message says what to fix here."""
