"""How ``aircc`` and ``airrun`` fail: one ``error: ...`` line on stderr and an exit code
that says what went wrong (:mod:`aircc.errors`: ``EXIT_USAGE``, ``EXIT_MODEL``,
``EXIT_INPUT``, ``EXIT_RUNTIME``, ``EXIT_INTERNAL``).

Both commands are built on :class:`OneLineErrorCommand` / :class:`OneLineErrorGroup`:
click's usage errors become a :class:`~aircc.errors.CommandLineError`, an
:class:`~aircc.errors.AirccError` exits with its ``exit_code``, and any other exception
is reported as an internal error.  ``--help`` and ``--version`` work as click's do.
"""
from __future__ import annotations

import re
import sys
from typing import Any, Callable, NoReturn

import click

from aircc.errors import (EXIT_INPUT, EXIT_INTERNAL, EXIT_MODEL, EXIT_RUNTIME, EXIT_USAGE,
                          AirccError, CommandLineError)

#: Exit code of an interrupted command (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130

#: The exit codes, as ``--help`` lists them.
EXIT_CODES_HELP = (f"Errors are one 'error: [code] message' line on stderr. Exit codes: 0 success, "
                   f"{EXIT_USAGE} command line or environment, {EXIT_MODEL} model, {EXIT_INPUT} "
                   f"input data, {EXIT_RUNTIME} run time, {EXIT_INTERNAL} internal error "
                   f"(docs/errors.md).")


def one_line(text: str) -> str:
    """``text`` with its line breaks folded into `` | ``."""
    return re.sub(r"\s*\n\s*", " | ", str(text).strip())


def fail(error: BaseException) -> NoReturn:
    """Print ``error`` as one ``error:`` line on stderr and exit with its exit code."""
    if isinstance(error, AirccError):
        message, code = str(error), error.exit_code
    else:
        message = f"internal error: {type(error).__name__}: {error} (please report)"
        code = EXIT_INTERNAL
    click.echo(f"error: {one_line(message)}", err=True)
    sys.exit(code)


def usage_error(e: click.ClickException) -> CommandLineError:
    """A click usage error as a :class:`CommandLineError`, pointing at the command's help."""
    if isinstance(e, getattr(click.exceptions, "NoArgsIsHelpError", ())):   # click >= 8.2
        group = e.ctx.command if e.ctx else None
        names = ", ".join(group.list_commands(e.ctx)) if isinstance(group, click.Group) else ""
        message = f"missing command{f' ({names})' if names else ''}"
    else:
        message = e.format_message()
    ctx = getattr(e, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return CommandLineError(f"{message}{hint}")


def run_main(main: Callable[..., Any], args: Any, prog_name: Any, complete_var: Any,
             standalone_mode: bool, extra: dict) -> Any:
    """Run a command's click ``main``; in standalone mode turn every failure into one
    ``error:`` line and its exit code."""
    if not standalone_mode:
        return main(args, prog_name, complete_var, standalone_mode=False, **extra)
    try:
        rv = main(args, prog_name, complete_var, standalone_mode=False, **extra)
    except click.ClickException as e:
        fail(usage_error(e))
    except click.Abort:
        click.echo("error: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except Exception as e:  # an AirccError, or a bug: one line either way
        fail(e)
    sys.exit(rv if isinstance(rv, int) else 0)


class OneLineErrorCommand(click.Command):
    """A click command whose every failure is one ``error:`` line and a documented exit code."""

    def main(self, args: Any = None, prog_name: Any = None, complete_var: Any = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        return run_main(super().main, args, prog_name, complete_var, standalone_mode, extra)


class OneLineErrorGroup(click.Group):
    """A click group whose every failure (its own or a subcommand's) is one ``error:`` line
    and a documented exit code."""

    def main(self, args: Any = None, prog_name: Any = None, complete_var: Any = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        return run_main(super().main, args, prog_name, complete_var, standalone_mode, extra)
