"""`modellint run` and `modellint.watching()`: a user's own training run, watched for a bounded
number of steps (`record`: the instrumentation; `session`: checks and findings; `child`: the
process that runs the script; `cli`: the command)."""
