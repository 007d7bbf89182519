# The two commands of the Quick start: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
PYTEST_ARGS ?=
PYTEST_WORKERS ?= 2

.PHONY: demo test lint imports typecheck unit install node clean

$(STAMP): pyproject.toml libs/pot/pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# The proof-of-training library first: the project depends on it and no index serves it.
	$(BIN)/python -m pip install -q -c requirements.lock -e libs/pot
	$(BIN)/python -m pip install -q -c requirements.lock -e '.[dev]'
	touch $(STAMP)

# Node.js is a test-only dependency: the independent Plutus evaluator (Aiken's uplc as WASM)
# and the Blockfrost clients (Blaze, Lucid Evolution, Mesh) run against the devnet.
# package.json overrides cbor-extract to 2.2.2: 2.2.3's platform binaries are not on the
# registry, and without them in the lock `npm ci` refuses the lock as out of sync.
$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

install: $(STAMP)

node: $(NODE_STAMP)

demo: $(STAMP)
	$(BIN)/proofnet demo

lint: $(STAMP)
	$(BIN)/ruff check libs/pot/pot proofnet chain oracle worker api auditor demos benchmarks scripts tests
	$(BIN)/ruff format --check libs/pot/pot proofnet chain oracle worker api auditor demos benchmarks scripts tests

# The dependency rules of docs/architecture.md ([tool.importlinter] in pyproject.toml).
imports: $(STAMP)
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy libs/pot/pot proofnet chain oracle worker api auditor demos benchmarks

# --dist loadscope: a module's tests share one worker, so a module fixture (a devnet, a whole
# loop) is built once, not once per worker; tests/conftest.py starts the slow modules first.
unit: $(STAMP) $(NODE_STAMP)
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadscope $(PYTEST_ARGS)

test: lint imports typecheck unit

clean:
	rm -rf $(VENV) node_modules .pytest_cache .mypy_cache .ruff_cache
