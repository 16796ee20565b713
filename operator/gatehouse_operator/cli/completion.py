"""Shell completion for the CLI, generated from its argparse parser.

Static scripts (cmctl's ``completion`` command, without cobra): the words each command takes are
written into the script, so pressing tab never starts Python (the CLI imports the Kubernetes
client, half a second). kubectl completes its plugins by running ``kubectl_complete-<plugin>``
with the words typed so far, and reads cobra's answer: one word a line, then ``:<directive>``.
"""

from __future__ import annotations

import argparse
import shlex

SHELLS = ("bash", "zsh", "fish")


def words(parser: argparse.ArgumentParser) -> dict[tuple[str, ...], list[str]]:
    """For each command path (``()``, ``("service",)``, ...): the subcommands and options."""
    found: dict[tuple[str, ...], list[str]] = {}

    def walk(node: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        taken: list[str] = []
        for action in node._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    taken.append(name)
                    walk(sub, (*path, name))
            elif action.option_strings:
                taken += [option for option in action.option_strings if option.startswith("--")]
            elif action.choices:  # a positional with fixed values: completion's shell
                taken += [str(choice) for choice in action.choices]
        found[path] = taken

    walk(parser, ())
    return found


def script(shell: str, parser: argparse.ArgumentParser, commands: list[str]) -> str:
    """The completion script of ``shell`` for ``commands`` (the CLI's names, kubectl's plugin's
    included)."""
    table = words(parser)
    if shell == "fish":
        return _fish(table, commands)
    function = "_" + commands[0].replace("-", "_")
    # Keys start with "@": bash's associative arrays take no empty key (the bare command).
    entries = "\n".join(
        f"    [{shlex.quote(' '.join(('@', *path)))}]={shlex.quote(' '.join(taken))}"
        for path, taken in table.items()
    )
    bash = f"""{function}() {{
    local -A taken=(
{entries}
    )
    local path="@" word
    for word in "${{COMP_WORDS[@]:1:COMP_CWORD-1}}"; do
        if [[ -n "${{taken[$path $word]+x}}" ]]; then
            path="$path $word"
        fi
    done
    COMPREPLY=($(compgen -W "${{taken[$path]}}" -- "${{COMP_WORDS[COMP_CWORD]}}"))
}}
complete -F {function} {" ".join(commands)}
"""
    if shell == "zsh":
        return "autoload -U +X bashcompinit && bashcompinit\n" + bash
    return bash


def _fish(table: dict[tuple[str, ...], list[str]], commands: list[str]) -> str:
    lines = []
    for command in commands:
        for path, taken in table.items():
            # Offered once the path's words are on the line and none of its subcommands is.
            subcommands = [word for word in taken if not word.startswith("-")]
            conditions = [f"__fish_seen_subcommand_from {word}" for word in path]
            if subcommands:
                conditions.append(f"not __fish_seen_subcommand_from {' '.join(subcommands)}")
            if not path:
                conditions = ["__fish_use_subcommand"]
            condition = shlex.quote("; and ".join(conditions))
            for word in taken:
                if word.startswith("--"):
                    lines.append(f"complete -c {command} -n {condition} -l {word[2:]}")
                else:
                    lines.append(f"complete -c {command} -f -n {condition} -a {word}")
    return "\n".join(lines) + "\n"


# cobra's ShellCompDirectiveNoFileComp: offer the words given, never file names.
NO_FILES = 4


def offered(parser: argparse.ArgumentParser, typed: list[str]) -> list[str]:
    """The words that complete the last of ``typed`` (the words after the command's name)."""
    table = words(parser)
    path: tuple[str, ...] = ()
    for word in typed[:-1]:
        if (*path, word) in table:
            path = (*path, word)
    prefix = typed[-1] if typed else ""
    return [word for word in table[path] if word.startswith(prefix)]


def cobra_answer(parser: argparse.ArgumentParser, typed: list[str]) -> str:
    return "".join(f"{word}\n" for word in offered(parser, typed)) + f":{NO_FILES}\n"
