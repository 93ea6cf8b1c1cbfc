"""The test and conformance steps: a pytest suite run with crash isolation, in parts on
this worker's cores or in shards on other workers."""
