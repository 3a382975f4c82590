"""Diagnosis: pure classifiers of a history window (G3, G4, G6) and the events they imply."""
