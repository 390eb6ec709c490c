"""Every hook we show a user runs in an image that has what its command calls.

localkube runs a container's command on the host whatever its image, so an example whose hook calls `kubectl` in
`busybox` passes every local test and fails on a real cluster with `kubectl: not found`. This check reads each hook
(a mapping with an `image` and a `command`) of examples/, of the README's YAML blocks and of the files the chart's
NOTES and the README tell a user to apply, finds the programs its command runs (for `sh -c SCRIPT`, every command
word of the script, in `$(...)` too), and requires each one to be a builtin of the shell or a binary the image is
known to ship, by the table below.

The table lists only images we checked against their published sources; an image not in it fails the check, so a
new example says where its image's binaries come from.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
README = ROOT / "README.md"
NOTES = ROOT / "deploy" / "chart" / "agentrun" / "templates" / "NOTES.txt"

# BusyBox's applets that the hooks here use (both images below have a BusyBox userland; the full applet lists are
# far longer). docker-library/busybox builds the `busybox:<version>` image from BusyBox's defconfig, which enables
# every one of these; Alpine's base image (`alpine:<version>`) is BusyBox too (its busybox package's config).
BUSYBOX = frozenset({
    "sh", "ash", "awk", "base64", "basename", "cat", "cp", "cut", "date", "dirname", "env", "grep", "head", "ls",
    "mkdir", "mv", "rm", "sed", "sleep", "sort", "tail", "tee", "touch", "tr", "uniq", "wc", "wget", "xargs",
})
IMAGES: dict[str, tuple[frozenset[str], str]] = {
    # Only BusyBox: no kubectl, no curl.
    "busybox:1.36": (BUSYBOX, "docker-library/busybox: BusyBox 1.36 (defconfig), nothing else"),
    # alpine-docker/multi-arch-docker-images, kubectl/Dockerfile: `FROM alpine`, `apk add curl`, the kubectl release
    # binary in /usr/local/bin (entrypoint kubectl; a hook's command replaces it). Tags are kubectl's version.
    "docker.io/alpine/kubectl:1.34.2": (BUSYBOX | {"kubectl", "curl"},
                                        "alpine-docker/multi-arch-docker-images kubectl/Dockerfile"),
    # alpine-docker/k8s, Dockerfile: `FROM alpine`, `apk add curl ca-certificates bash git jq yq gettext python3`,
    # helm, kubectl, kustomize, eksctl, awscli, aws-iam-authenticator, kubeseal in /usr/bin. Tags are kubectl's
    # version. (The k8s-ops SkillPack's sidecar: `sleep infinity` under the executor, kubectl for the model.)
    "docker.io/alpine/k8s:1.31.3": (BUSYBOX | {"kubectl", "curl", "bash", "git", "jq", "yq", "envsubst", "helm",
                                               "kustomize", "python3", "aws", "eksctl", "kubeseal"},
                                    "alpine-docker/k8s Dockerfile"),
}
# Shell builtins of BusyBox ash and of dash (what `sh` is in these images): never looked up as binaries.
BUILTINS = frozenset({
    ":", ".", "[", "break", "cd", "command", "continue", "echo", "eval", "exec", "exit", "export", "false", "getopts",
    "hash", "kill", "local", "printf", "pwd", "read", "readonly", "return", "set", "shift", "test", "times", "trap",
    "true", "type", "ulimit", "umask", "unset", "wait",
})
SHELLS = {"sh", "/bin/sh", "ash", "/bin/ash", "bash", "/bin/bash"}
KEYWORDS_BEFORE_COMMAND = {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "}", "fi", "done"}
UNSUPPORTED = {"case", "for", "function", "select", "<<", "<<-"}
OPERATORS = ("&&", "||", ";;", ">>", "<<-", "<<", ">&", "<&", "|", ";", "&", "(", ")", ">", "<", "\n")
REDIRECT = {">", ">>", "<", ">&", "<&"}


class Unsupported(ValueError):
    """A script this reader does not follow: rewrite the hook, or teach the reader."""


def _words(script: str) -> Iterator[tuple[str, str]]:
    """("word", text) and ("op", operator) tokens of a POSIX shell script, with ("sub", script) for each command
    substitution (`$(...)` or backticks, also inside double quotes)."""
    i, n = 0, len(script)
    word: list[str] = []
    subs: list[str] = []

    def flush() -> Iterator[tuple[str, str]]:
        if word:
            yield "word", "".join(word)
            word.clear()
        while subs:
            yield "sub", subs.pop(0)

    def substitution(j: int) -> tuple[str, int]:
        """The text of `$(` ... `)` starting at j (just after `$(`), and the index after its `)`."""
        depth, k, quote = 1, j, ""
        while k < n:
            c = script[k]
            if quote:
                if c == "\\" and quote == '"':
                    k += 1
                elif c == quote:
                    quote = ""
            elif c in "'\"":
                quote = c
            elif c == "\\":
                k += 1
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    return script[j:k], k + 1
            k += 1
        raise Unsupported("unterminated $(")

    while i < n:
        c = script[i]
        if c == "#" and not word:
            while i < n and script[i] != "\n":
                i += 1
            continue
        if c in " \t":
            yield from flush()
            i += 1
            continue
        if c == "\\":
            word.append(script[i + 1:i + 2])
            i += 2
            continue
        if c == "'":
            end = script.index("'", i + 1)
            word.append(script[i + 1:end])
            i = end + 1
            continue
        if c == '"':
            i += 1
            while i < n and script[i] != '"':
                if script[i] == "\\":
                    word.append(script[i + 1:i + 2])
                    i += 2
                elif script.startswith("$(", i):
                    text, i = substitution(i + 2)
                    subs.append(text)
                    word.append("$(...)")
                elif script[i] == "`":
                    end = script.index("`", i + 1)
                    subs.append(script[i + 1:end])
                    i = end + 1
                else:
                    word.append(script[i])
                    i += 1
            i += 1
            continue
        if script.startswith("$(", i):
            text, i = substitution(i + 2)
            subs.append(text)
            word.append("$(...)")
            continue
        if c == "`":
            end = script.index("`", i + 1)
            subs.append(script[i + 1:end])
            i = end + 1
            continue
        op = next((o for o in OPERATORS if script.startswith(o, i)), None)
        if op is not None:
            if op in (">", "<", ">>", ">&", "<&") and word and all(ch.isdigit() for ch in word):
                word.clear()  # a file descriptor: 2>&1
            yield from flush()
            yield "op", op
            i += len(op)
            continue
        word.append(c)
        i += 1
    yield from flush()


def script_commands(script: str) -> set[str]:
    """The command words of a shell script (recursively, those of its command substitutions)."""
    found: set[str] = set()
    expect_command, after_redirect = True, False
    for kind, text in _words(script):
        if kind == "sub":
            found |= script_commands(text)
            continue
        if kind == "op":
            if text in UNSUPPORTED:
                raise Unsupported(f"{text!r} in a hook script")
            after_redirect = text in REDIRECT
            if not after_redirect:
                expect_command = text not in (")",)
            continue
        if after_redirect:  # a file name, e.g. > /workspace/context/notes.txt
            after_redirect = False
            continue
        if not expect_command:
            continue
        if text in UNSUPPORTED:
            raise Unsupported(f"{text!r} in a hook script")
        if text in KEYWORDS_BEFORE_COMMAND:
            continue
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", text):  # an assignment before (or instead of) a command
            continue
        if text in ("exec", "command"):  # the next word is the program
            continue
        found.add(text)
        expect_command = False
    return found


def programs(command: list[str]) -> set[str]:
    """What a container's command runs: the program, and for `SHELL -c SCRIPT` each command of the script."""
    if not command:
        return set()
    if command[0] in SHELLS and len(command) >= 3 and command[1] == "-c":
        return {command[0].rsplit("/", 1)[-1]} | script_commands(command[2])
    return {command[0].rsplit("/", 1)[-1]}


def containers(node: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every mapping with an image and a command (a hook, a sidecar) anywhere in a document."""
    if isinstance(node, dict):
        if isinstance(node.get("image"), str) and (node.get("command") or node.get("args")):
            yield f"{where}.{node.get('name', '?')}", node
        for key, value in node.items():
            yield from containers(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from containers(value, f"{where}[{i}]")


def readme_yaml_blocks() -> list[tuple[str, Any]]:
    text = README.read_text()
    out = []
    for m in re.finditer(r"^```yaml\n(.*?)^```", text, flags=re.S | re.M):
        line = text.count("\n", 0, m.start()) + 1
        for doc in yaml.safe_load_all(m.group(1)):
            out.append((f"README.md:{line}", doc))
    return out


def shown_documents() -> list[tuple[str, Any]]:
    docs: list[tuple[str, Any]] = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        docs += [(str(path.relative_to(ROOT)), d) for d in yaml.safe_load_all(path.read_text()) if d]
    return docs + readme_yaml_blocks()


def hooks() -> list[tuple[str, dict[str, Any]]]:
    return [found for where, doc in shown_documents() for found in containers(doc, where)]


def check(container: dict[str, Any]) -> list[str]:
    """What is wrong with one container: an image we know nothing of, or programs its image lacks."""
    image = container["image"]
    if image not in IMAGES:
        return [f"image {image!r} is not in the table of known images (tests/examples/test_hook_images.py)"]
    has, _source = IMAGES[image]
    command = list(container.get("command") or []) + list(container.get("args") or [])
    missing = sorted(p for p in programs(command) if p not in has and p not in BUILTINS)
    return [f"{image} has no {', '.join(missing)}"] if missing else []


def test_there_are_hooks_to_check() -> None:
    found = {where.split(":")[0].split(".")[0] for where, _ in hooks()}
    assert {"examples/prerun-context", "examples/postrun-report", "examples/pii-gate", "examples/retry-gate",
            "examples/rbac-configmap", "examples/manual-approval"} <= {w.removesuffix(".yaml") for w in found}


@pytest.mark.parametrize(("where", "container"), hooks(), ids=[where for where, _ in hooks()])
def test_each_hook_runs_only_what_its_image_has(where: str, container: dict[str, Any]) -> None:
    assert check(container) == [], where


def test_the_smoke_test_of_the_readme_and_the_chart_notes_applies_examples_that_exist() -> None:
    """The install's smoke test names the same example files in both places, and they exist (so they are the files
    checked above)."""
    applied = re.compile(r"kubectl apply((?: -f examples/[\w./-]+)+)")
    in_readme = [m.group(1).split(" -f ")[1:] for m in applied.finditer(README.read_text())]
    in_notes = [m.group(1).split(" -f ")[1:] for m in applied.finditer(NOTES.read_text())]
    assert in_notes and in_readme and in_notes[0] in in_readme
    for files in in_readme + in_notes:
        for f in files:
            assert (ROOT / f).is_file(), f


# -- the reader itself: a check that cannot fail would be worth nothing -------------------------------------------

def test_the_reader_finds_kubectl_in_a_busybox_hook() -> None:
    hook = {"image": "busybox:1.36", "command": ["sh", "-c", 'kubectl get cm x -o jsonpath="{.data}" > /tmp/x']}
    assert check(hook) == ["busybox:1.36 has no kubectl"]


@pytest.mark.parametrize(("script", "found"), [
    ("mkdir -p /w\nkubectl get cm a > /w/b\necho \"got $(wc -c < /w/b) bytes\"", {"mkdir", "kubectl", "echo", "wc"}),
    ("if printf '%s' \"$X\" | grep -Eq 'a|b'; then v='{\"a\":1}'; else v=2; fi\nkubectl annotate r \"n=$v\"",
     {"printf", "grep", "kubectl"}),
    ("A=1 B=2 env; exec sleep 1 && true || `date`", {"env", "sleep", "true", "date"}),
    ("echo 'kubectl is quoted' # kubectl in a comment\ncat /x 2>&1 | tee /y", {"echo", "cat", "tee"}),
])
def test_the_reader_finds_each_command_word(script: str, found: set[str]) -> None:
    assert script_commands(script) == found


def test_the_reader_refuses_what_it_does_not_follow() -> None:
    with pytest.raises(Unsupported):
        script_commands("for f in a b; do kubectl get $f; done")
