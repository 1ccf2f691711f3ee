"""Conformance, the judging floor: verdicts, the oracles, the certification areas, the session
(every case judged, each new defect localized and shrunk once: `judging`), defects, the pytest
plugin and isolation. What a backend implements is `gradcert.backends.protocol`; runs
(certify, fuzz, check, replay) are `gradcert.runs`."""

from gradcert.conformance.verdicts import Status, Verdict

__all__ = ["Status", "Verdict"]
