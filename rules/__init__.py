"""modellint's built-in rules, one plugin module per topic."""
