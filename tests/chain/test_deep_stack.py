"""The process-wide recursion limit under concurrent deep work (chain/deep_stack.py).

A settlement bench once failed with "maximum recursion depth" in a certificate script: a
thread that had raised the limit around its own call restored the old value on leaving while
the devnet's deep-stack pool was still evaluating. Each test is that race, played on purpose.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

from chain.deep_stack import RECURSION_LIMIT, deep_recursion, run_deep

DEPTH = 150_000  # far past any limit a hold below asks for, within the pool's


def _descend(n: int) -> int:
    return 0 if n == 0 else 1 + _descend(n - 1)


def test_overlapping_holds_keep_the_highest_limit_until_the_last_ends() -> None:
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, int] = {}

    def first() -> None:
        with deep_recursion(50_000):
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with deep_recursion(120_000):
            second_in.set()
            first_out.wait(10)
            # The first hold ended while this one is live: the limit did not drop under it.
            seen["while_second_holds"] = sys.getrecursionlimit()
            seen["depth"] = _descend(100_000)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert seen["while_second_holds"] >= 120_000
    assert seen["depth"] == 100_000


# In a fresh interpreter, so the pool starts inside the first hold, as in the bench: that
# hold's end used to restore Python's 1,000 under evaluations still descending.
SCENARIO = textwrap.dedent(
    f"""
    import sys, threading
    from chain.deep_stack import RECURSION_LIMIT, deep_recursion, run_deep

    def descend(n, halfway, resume):
        if n == {DEPTH // 2}:
            halfway.set()
            assert resume.wait(30), "never resumed"
        return 0 if n == 0 else 1 + descend(n - 1, halfway, resume)

    halfway, resume = threading.Event(), threading.Event()
    results, errors = [], []

    def evaluate():
        try:
            results.append(run_deep(descend, {DEPTH}, halfway, resume))
        except BaseException as exc:
            errors.append(repr(exc)[:200])

    def churn():
        for _ in range(200):
            with deep_recursion(10_000):
                pass

    with deep_recursion(50_000):
        workers = [threading.Thread(target=evaluate) for _ in range(4)]
        for w in workers:
            w.start()
        assert halfway.wait(60), "no evaluation got halfway"
    churners = [threading.Thread(target=churn) for _ in range(3)]
    for c in churners:
        c.start()
    for c in churners:
        c.join()
    resume.set()
    for w in workers:
        w.join(120)
    assert not errors, errors
    assert results == [{DEPTH}] * 4, results
    assert sys.getrecursionlimit() >= RECURSION_LIMIT
    print("ok")
    """
)


def test_deep_evaluations_survive_holds_ending_on_other_threads() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCENARIO], capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


def test_concurrent_deep_evaluations_in_this_process() -> None:
    results: list[int] = []
    errors: list[BaseException] = []

    def evaluate() -> None:
        try:
            results.append(run_deep(_descend, DEPTH))
        except BaseException as exc:  # the assertion below reports it
            errors.append(exc)

    threads = [threading.Thread(target=evaluate) for _ in range(4)]
    for t in threads:
        t.start()
    with deep_recursion(20_000):
        pass  # a short hold ending meanwhile never lowers the pool's limit
    for t in threads:
        t.join(120)
    assert not errors and results == [DEPTH] * 4
    assert sys.getrecursionlimit() >= RECURSION_LIMIT
