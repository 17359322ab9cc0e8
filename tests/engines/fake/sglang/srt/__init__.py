"""A stand-in package for tests (see tests/engines/README.md)."""
