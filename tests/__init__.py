"""The test suite: one package, so `tests.support` (the code tests share) and `bench` import without path tricks."""
