"""A time machine for heads: a history's integrity (content hashes), heads matched across steps and
models, the steps where a head takes a role (events), and ``why`` at every step. Qt-free."""
