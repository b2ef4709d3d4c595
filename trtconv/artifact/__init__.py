"""A trtconv artifact: a directory holding its payload and `manifest.json` (`manifest`), the
record of what it holds and how it was made that every reader of an artifact trusts."""
