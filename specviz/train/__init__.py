"""Training commands for the shipped models (`python -m specviz.train <command>`)."""
