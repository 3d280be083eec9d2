"""Texts a tokenizer is checked on against transformers': accents, CJK, emoji (a joined family, a flag),
runs of spaces and newlines, tabs, a leading space, digits, code and special-looking tokens."""

TEXTS = (
    "The quick brown fox jumps over the lazy dog.",
    "naïve café — déjà vu, Ærø, Straße, señor, ÅÄÖ åäö",
    "東京タワーと日本語の文章。中文也可以。한국어 문장도.",
    "emoji 🙂🚀 a family 👩‍👩‍👧 and a flag 🇫🇷!",
    "  two leading spaces,  two  inside,   three",
    "lines\n\nand a blank one\n\n\nthen three\r\nand a CRLF",
    "\ttabs\tbetween\twords",
    " a leading space",
    "digits 1234567890 3.14159 1,000,000",
    "def f(x):\n    return x ** 2  # code",
    "<s> </s> <unk> <bos> <eos> <pad> [INST] words [/INST]",
    "x",
)
