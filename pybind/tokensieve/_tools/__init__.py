"""The command line (`tokensieve …`): the demo, the web page, the fuzzer."""
