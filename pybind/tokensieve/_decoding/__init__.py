"""Decoding: the matcher (one request's state in the core), batch fills, fast-forward healing,
prompt-lookup drafts and the generation loop that ties them together."""
