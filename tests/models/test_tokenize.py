"""Tokenizer: words, punctuation, CJK characters and whole emoji."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.config import InputError
from models.engine.tokenize import tokenize, tokens_or_error


@pytest.mark.parametrize(
    "sentence,tokens",
    [
        ("The cat sat on the mat.", ["The", "cat", "sat", "on", "the", "mat", "."]),
        ("Hello, world! Isn't it?", ["Hello", ",", "world", "!", "Isn", "'", "t", "it", "?"]),
        ("pi = 3.14159", ["pi", "=", "3", ".", "14159"]),
        ("snake_case and naïve Übermensch", ["snake_case", "and", "naïve", "Übermensch"]),
        ("  spaced\tout\nlines  ", ["spaced", "out", "lines"]),
        ("", []),
    ],
)
def test_words_and_punctuation_are_separate_tokens(sentence, tokens):
    assert tokenize(sentence) == tokens


@pytest.mark.parametrize(
    "sentence,tokens",
    [
        ("我爱你", ["我", "爱", "你"]),
        ("I love 東京!", ["I", "love", "東", "京", "!"]),
        ("こんにちは", ["こ", "ん", "に", "ち", "は"]),
        ("カタカナ", ["カ", "タ", "カ", "ナ"]),
        ("안녕하세요", ["안", "녕", "하", "세", "요"]),
        ("2024年は良い。", ["2024", "年", "は", "良", "い", "。"]),
    ],
)
def test_cjk_text_is_one_token_per_character(sentence, tokens):
    assert tokenize(sentence) == tokens


@pytest.mark.parametrize(
    "emoji",
    [
        "🍕",
        "❤️",  # heart + variation selector 16
        "👍🏽",  # skin tone modifier
        "👨‍👩‍👧‍👦",  # family: four people joined by ZWJ
        "👩🏽‍💻",  # skin tone inside a ZWJ sequence
        "🏳️‍🌈",  # variation selector inside a ZWJ sequence
        "🇫🇷",  # flag: a pair of regional indicators
        "1️⃣",  # keycap
        "#️⃣",
        "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",  # Scotland: tag sequence
    ],
)
def test_emoji_survive_whole_between_words(emoji):
    assert tokenize(f"I {emoji} pizza") == ["I", emoji, "pizza"]
    assert tokenize(f"({emoji})") == ["(", emoji, ")"]
    if not emoji[0].isalnum():  # a keycap's digit would join a word it touches
        assert tokenize(f"I{emoji}pizza") == ["I", emoji, "pizza"]


def test_adjacent_flags_and_emoji_are_separate_tokens():
    assert tokenize("🇫🇷🇩🇪👍🏽👍") == ["🇫🇷", "🇩🇪", "👍🏽", "👍"]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_tokenizing_never_drops_or_reorders_anything_but_whitespace(sentence):
    tokens = tokenize(sentence)
    assert "".join(tokens) == re.sub(r"\s", "", sentence)
    assert all(tok and not re.search(r"\s", tok) for tok in tokens)


def test_empty_and_over_long_sentences_are_input_errors():
    with pytest.raises(InputError, match="sentence is empty"):
        tokens_or_error("  \n", 10)
    with pytest.raises(InputError, match="second sentence is empty"):
        tokens_or_error(None, 10, "second sentence")
    with pytest.raises(InputError, match="has 4 tokens, more than the limit of 3"):
        tokens_or_error("a b c d", 3)
    assert tokens_or_error("a b c", 3) == ["a", "b", "c"]


def test_combining_marks_stay_inside_their_word():
    # Regression: re's \w excludes combining marks, which split Devanagari words and a separately
    # typed accent into pieces.
    assert tokenize("नमस्ते दुनिया") == ["नमस्ते", "दुनिया"]
    assert tokenize("cafe\u0301 ok") == ["cafe\u0301", "ok"]
    assert tokenize("क्षत्रिय!") == ["क्षत्रिय", "!"]
