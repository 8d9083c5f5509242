# The README's commands: `make demo`, `make test` and `make install`. Each creates .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast install lint bench clean browser

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned to the CPU build this machine carries; then the project with a
	# range 2.13.0 satisfies, so pip never reaches for CUDA wheels.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)
	@echo "bertkit is installed in $(VENV): run 'source $(BIN)/activate' (then 'bertkit --help'), or call $(BIN)/bertkit"

demo: $(STAMP)
	$(BIN)/bertkit demo

# the page's browser tests (tests/serve/test_page_browser.py) need Debian's chromium and
# chromium-driver: installed once per machine where this runs as root (or password-less sudo),
# a no-op once they are there; never fails the run (without them those tests skip and say how)
browser:
	@bash .ci/install-browser

test: $(STAMP) browser
	$(BIN)/ruff check src tests bench
	$(BIN)/python -m pytest -q

# the quick lane while working: no test marked slow (CI runs `make test`, all of them)
test-fast: $(STAMP) browser
	$(BIN)/ruff check src tests bench
	$(BIN)/python -m pytest -q -m "not slow"

bench: $(STAMP)
	$(BIN)/python bench/tokenizer.py
	$(BIN)/python bench/inference.py

clean:
	rm -rf $(VENV) demo_out
