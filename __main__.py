"""``python -m aircc``: the ``aircc`` command (compile, inspect, ops, ...)."""
from aircc.cli.aircc_cmd import main

if __name__ == "__main__":
    main(prog_name="aircc")
