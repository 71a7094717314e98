from modellint.cli import run_command

run_command()
