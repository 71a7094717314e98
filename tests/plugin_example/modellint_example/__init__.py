"""An example third-party modellint plugin (see `modellint_example.rules`)."""
