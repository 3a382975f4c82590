"""Sources: one module each, listed in one explicit tuple by build_sources()."""
