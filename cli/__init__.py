"""The `sagewarden` command line: submit, list, inspect and cancel runs through the IAM-authorised API."""
