"""Train the tiny LLaMA-format decoder shipped as ``--model induction`` (``python main.py train``).

Qt-free and transformers-free: plain torch, ``tokenizers`` and ``safetensors``. One file per concern:
data.py (the seeded character data), tiny_llama.py (the model), tokenizer_file.py (tokenizer.json),
checkpoints.py (the log-spaced schedule and the folders), scores.py (previous-token and induction
scores), train.py (the loop), train_cli.py (the command line).
"""
