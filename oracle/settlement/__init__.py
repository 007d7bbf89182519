"""The oracle's settlement engine: intent log, batching, chain watching, quorum co-signing.

Nothing here does I/O at import; `engine.SettlementEngine` is the entry point a process uses.
"""
