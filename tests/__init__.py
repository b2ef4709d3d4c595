"""trtconv's tests: one folder per package folder of trtconv (tests/test_mirror.py holds it), the
shared helpers in tests/helpers, imported one way: `from tests.helpers.NAME import ...`."""
