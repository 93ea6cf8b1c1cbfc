"""The conformance suite: one file per mechanism (``ootci_conformance.MECHANISMS``)."""
