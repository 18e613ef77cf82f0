"""The bundle wing: record a machine into one .tar.gz (collect), redact secrets from
what it holds (redact, redact_rules, redact_sqlite, pseudonyms)."""
