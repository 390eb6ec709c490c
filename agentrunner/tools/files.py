"""The file tools (Sympozium's names, arguments and limits): ``read_file``, ``write_file``, ``edit_file``,
``list_directory``, confined to ``/workspace`` (read-write) and ``/skills`` (read-only).

Paths are relative to ``/workspace`` or absolute under one of the two roots. ``..``, any other absolute path and a
symlink that leads out of its root are refused with a message the model reads. The confinement does not check a
path string and then open it (a symlink swapped in between would win that race): every path is walked component by
component from a file descriptor of the root, each step opened with ``O_NOFOLLOW`` relative to the directory
before it, and a symlink met on the way is read and followed by the same walk, never by the kernel. What is opened
at the end is therefore inside the root, whatever changes on disk meanwhile.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrunner.tools import Tool, ToolError, arg_bool, arg_int, arg_str, schema

READ_MAX_BYTES = 8_000  # read_file answers at most this much per call (Sympozium's cap)
LIST_MAX_ENTRIES = 1_000
MAX_SYMLINK_HOPS = 40
FILE_MODE = 0o664  # group-writable: the tools container may run as another user of the pod's fsGroup
DIR_MODE = 0o775
WORKSPACE = "/workspace"
SKILLS = "/skills"


@dataclass(frozen=True)
class Roots:
    workspace: Path
    skills: Path


class _Walk:
    """A confined path walk: a stack of open directory fds from the root down."""

    def __init__(self, root: Path, label: str) -> None:
        self.label = label
        try:
            self.fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY)]
        except OSError as exc:
            raise ToolError(f"{label} is not available in this container ({exc.strerror})") from None
        self.parts: list[str] = []

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []

    @property
    def fd(self) -> int:
        return self.fds[-1]

    def shown(self, name: str = "") -> str:
        return "/".join([self.label, *self.parts, *([name] if name else [])])

    def up(self) -> None:
        if len(self.fds) == 1:
            raise ToolError(f"refused: the path leads out of {self.label}")
        os.close(self.fds.pop())
        self.parts.pop()

    def down(self, name: str, *, create: bool) -> None:
        """Enter directory `name`; a symlink is followed by walking its target."""
        for _ in range(MAX_SYMLINK_HOPS):
            try:
                fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=self.fd)
            except FileNotFoundError:
                if not create:
                    raise ToolError(f"{self.shown(name)} does not exist") from None
                try:
                    os.mkdir(name, DIR_MODE, dir_fd=self.fd)
                except FileExistsError:
                    pass
                continue
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and self._is_link(name):
                    self.follow(name, create=create)
                    return
                if exc.errno == errno.ENOTDIR:
                    raise ToolError(f"{self.shown(name)} is not a directory") from None
                raise ToolError(f"cannot open {self.shown(name)}: {exc.strerror}") from None
            self.fds.append(fd)
            self.parts.append(name)
            return
        raise ToolError(f"cannot create {self.shown(name)}")

    def _is_link(self, name: str) -> bool:
        try:
            return stat.S_ISLNK(os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode)
        except OSError:
            return False

    def follow(self, name: str, *, create: bool) -> None:
        """Walk into the directory symlink `name` points at (its target is walked like any path)."""
        target = os.readlink(name, dir_fd=self.fd)
        self.walk(target, create=create, link=True)

    def walk(self, path: str, *, create: bool, link: bool = False) -> None:
        if path.startswith("/"):
            if not link:
                raise ToolError("internal: absolute paths are mapped before the walk")
            if not (path == self.label or path.startswith(self.label + "/")):
                raise ToolError(f"refused: a symlink leads out of {self.label} (to {path})")
            while len(self.fds) > 1:
                self.up()
            path = path[len(self.label):]
        for part in path.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                self.up()
            else:
                self.down(part, create=create)


def split_path(path: str, roots: Roots, *, write: bool) -> tuple[Path, str, str]:
    """(root directory, its label, path relative to it) for a path the model gave; refuses what is not allowed."""
    if not path or not path.strip():
        raise ToolError("argument 'path' is empty")
    if "\x00" in path:
        raise ToolError("refused: the path contains a NUL byte")
    parts = path.split("/")
    if ".." in parts:
        raise ToolError(f"refused: {path!r} contains '..'; paths stay inside {WORKSPACE}")
    if path.startswith("/"):
        for label, root in ((WORKSPACE, roots.workspace), (SKILLS, roots.skills)):
            if path == label or path.startswith(label + "/"):
                if write and label == SKILLS:
                    raise ToolError(f"refused: {SKILLS} is read-only")
                return root, label, path[len(label):].lstrip("/")
        allowed = f"{WORKSPACE} (or {SKILLS}, read-only)" if not write else WORKSPACE
        raise ToolError(f"refused: {path!r} is outside {allowed}; give a path relative to {WORKSPACE}")
    return roots.workspace, WORKSPACE, path


@contextmanager
def confined(path: str, roots: Roots, *, write: bool, create_parents: bool = False) -> Iterator[tuple[_Walk, str]]:
    """The directory walk of `path`'s parent and its last component (empty for the root itself)."""
    root, label, rel = split_path(path, roots, write=write)
    walk = _Walk(root, label)
    try:
        parts = [p for p in rel.split("/") if p not in ("", ".")]
        if parts:
            walk.walk("/".join(parts[:-1]), create=create_parents)
        yield walk, (parts[-1] if parts else "")
    finally:
        walk.close()


def _open_last(walk: _Walk, name: str, flags: int, mode: int = FILE_MODE) -> int:
    """Open the last component under the walk; a symlink is followed inside the root."""
    for _ in range(MAX_SYMLINK_HOPS):
        if not name:
            return os.dup(walk.fd) if flags & os.O_DIRECTORY or not flags & (os.O_WRONLY | os.O_RDWR) \
                else _raise(f"{walk.shown()} is a directory")
        try:
            return os.open(name, flags | os.O_NOFOLLOW, mode, dir_fd=walk.fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and walk._is_link(name)):
                target = os.readlink(name, dir_fd=walk.fd)
                head, _, name = target.rstrip("/").rpartition("/")
                if target.startswith("/") and not head:
                    head = "/"
                if head:
                    walk.walk(head, create=False, link=True)
                continue
            if exc.errno == errno.ENOENT:
                raise ToolError(f"{walk.shown(name)} does not exist") from None
            if exc.errno == errno.EISDIR:
                raise ToolError(f"{walk.shown(name)} is a directory") from None
            if exc.errno == errno.ENOTDIR:
                raise ToolError(f"{walk.shown(name)} is not a directory") from None
            raise ToolError(f"cannot open {walk.shown(name)}: {exc.strerror}") from None
    raise ToolError(f"too many symlinks at {walk.shown(name)}")


def _resolve_last(walk: _Walk, name: str) -> str:
    """Follow symlinks at the last component (inside the root); the walk ends in the final name's directory."""
    for _ in range(MAX_SYMLINK_HOPS):
        if not name or not walk._is_link(name):
            return name
        target = os.readlink(name, dir_fd=walk.fd)
        head, _, name = target.rstrip("/").rpartition("/")
        if target.startswith("/") and not head:
            head = "/"
        if head:
            walk.walk(head, create=False, link=True)
    raise ToolError(f"too many symlinks at {walk.shown(name)}")


def _raise(message: str) -> int:
    raise ToolError(message)


def _read_all(fd: int, limit: int) -> bytes:
    chunks, size = [], 0
    while size <= limit:
        data = os.read(fd, 65536)
        if not data:
            break
        chunks.append(data)
        size += len(data)
    return b"".join(chunks)


def _atomic_write(walk: _Walk, name: str, data: bytes, mode: int) -> None:
    """Write `data` as `name` in the walk's directory through a temporary file and a rename: never half a file."""
    tmp = f".{name}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=walk.fd)
    try:
        os.fchmod(fd, mode)  # exactly this mode, whatever the umask
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, name, src_dir_fd=walk.fd, dst_dir_fd=walk.fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=walk.fd)
        except OSError:
            pass
        raise


def read_text(path: str, roots: Roots, *, limit_bytes: int = 16 * 1024 * 1024) -> str:
    with confined(path, roots, write=False) as (walk, name):
        fd = _open_last(walk, name, os.O_RDONLY)
        try:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                raise ToolError(f"{walk.shown(name)} is a directory: use list_directory")
            data = _read_all(fd, limit_bytes)
        finally:
            os.close(fd)
    return data.decode("utf-8", errors="replace")


async def read_file(args: dict[str, Any], roots: Roots) -> str:
    path = arg_str(args, "path")
    offset = arg_int(args, "offset", 1) or 1
    limit = arg_int(args, "limit", 0) or 0
    if offset < 1:
        raise ToolError("argument 'offset' is a 1-based line number")
    content = read_text(path, roots)
    if offset == 1 and limit == 0 and len(content.encode()) <= READ_MAX_BYTES:
        return content
    lines = content.split("\n")
    total = len(lines) - (1 if content.endswith("\n") else 0)
    if offset > max(total, 1):
        raise ToolError(f"offset {offset} is past the end of the file ({total} lines)")
    end = total if limit <= 0 else min(total, offset - 1 + limit)
    selected = "\n".join(lines[offset - 1:end])
    data = selected.encode()
    if len(data) > READ_MAX_BYTES:
        head = data[:READ_MAX_BYTES].decode("utf-8", errors="ignore")
        cut = head.rfind("\n")
        if cut < 0:
            return head + f"\n... (truncated mid-line {offset} of {total}; the line exceeds the " \
                          f"{READ_MAX_BYTES}-byte cap)"
        last = offset - 1 + head[:cut].count("\n") + 1
        return head[:cut] + f"\n... (truncated at line {last} of {total}; continue with offset={last + 1})"
    if end < total:
        selected += f"\n... (showing lines {offset}-{end} of {total}; continue with offset={end + 1})"
    return selected


async def write_file(args: dict[str, Any], roots: Roots) -> str:
    path = arg_str(args, "path")
    content = arg_str(args, "content", required=True)
    data = content.encode()
    with confined(path, roots, write=True, create_parents=True) as (walk, name):
        if not name:
            raise ToolError(f"{walk.shown()} is a directory")
        name = _resolve_last(walk, name)  # writing through a link writes its target, still inside the root
        _atomic_write(walk, name, data, FILE_MODE)
        shown = walk.shown(name)
    return f"Successfully wrote {len(data)} bytes to {shown}"


@dataclass
class _Edit:
    old: str
    new: str
    replace_all: bool


def _edits(args: dict[str, Any]) -> list[_Edit]:
    raw = args.get("edits")
    if not isinstance(raw, list) or not raw:
        raise ToolError("argument 'edits' must be a non-empty array of {old_string, new_string} objects")
    out = []
    for i, e in enumerate(raw):
        if not isinstance(e, dict):
            raise ToolError(f"edits[{i}] is not an object")
        old = e.get("old_string", e.get("old"))
        new = e.get("new_string", e.get("new", ""))
        if not isinstance(old, str) or not isinstance(new, str):
            raise ToolError(f"edits[{i}]: old_string and new_string must be strings")
        replace_all = e.get("replace_all", False)
        if not isinstance(replace_all, bool):
            raise ToolError(f"edits[{i}]: replace_all must be true or false")
        out.append(_Edit(old, new, replace_all))
    return out


def apply_edits(text: str, edits: list[_Edit]) -> tuple[str, list[str]]:
    """The edits applied in order, all or nothing; each old text must match once unless replace_all."""
    notes = []
    for i, e in enumerate(edits):
        where = f"edits[{i}]: " if len(edits) > 1 else ""
        if not e.old:
            raise ToolError(f"{where}old_string is required")
        if e.old == e.new:
            raise ToolError(f"{where}old_string and new_string are identical")
        n = text.count(e.old)
        if n == 0:
            later = " (an earlier edit may have changed it)" if i else ""
            raise ToolError(f"{where}old_string not found in the file{later}; the file is unchanged")
        if n > 1 and not e.replace_all:
            lines: list[str] = []
            start = 0
            while (pos := text.find(e.old, start)) >= 0 and len(lines) < 10:
                lines.append(str(text.count("\n", 0, pos) + 1))
                start = pos + 1
            raise ToolError(f"{where}old_string matches {n} times (lines {', '.join(lines)}); add context to pick "
                            f"one, or set replace_all; the file is unchanged")
        line = text.count("\n", 0, text.find(e.old)) + 1
        text = text.replace(e.old, e.new) if e.replace_all else text.replace(e.old, e.new, 1)
        notes.append(f"line {line}: replaced {n if e.replace_all else 1} occurrence(s)")
    return text, notes


async def edit_file(args: dict[str, Any], roots: Roots) -> str:
    path = arg_str(args, "path")
    edits = _edits(args)
    with confined(path, roots, write=True) as (walk, name):
        name = _resolve_last(walk, name)
        fd = _open_last(walk, name, os.O_RDONLY)
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise ToolError(f"{walk.shown(name)} is a directory")
            text = _read_all(fd, 16 * 1024 * 1024).decode("utf-8", errors="replace")
        finally:
            os.close(fd)
        new, notes = apply_edits(text, edits)
        _atomic_write(walk, name, new.encode(), stat.S_IMODE(st.st_mode))
        shown = walk.shown(name)
    return f"Edited {shown} ({len(edits)} change(s)): " + "; ".join(notes)


async def list_directory(args: dict[str, Any], roots: Roots) -> str:
    path = arg_str(args, "path", required=False, default=".") or "."
    with confined(path, roots, write=False) as (walk, name):
        fd = _open_last(walk, name, os.O_RDONLY | os.O_DIRECTORY)
        try:
            entries = []
            with os.scandir(fd) as it:
                for entry in it:
                    entries.append(entry)
                    if len(entries) > LIST_MAX_ENTRIES:
                        break
            lines: list[str] = []
            for entry in sorted(entries[:LIST_MAX_ENTRIES], key=lambda e: e.name):
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                kind = "dir" if stat.S_ISDIR(st.st_mode) else "link" if stat.S_ISLNK(st.st_mode) else "file"
                lines.append(f"{kind:<6} {st.st_size:>8}  {entry.name}")
        finally:
            os.close(fd)
    if len(entries) > LIST_MAX_ENTRIES:
        lines.append(f"... (more than {LIST_MAX_ENTRIES} entries; list a subdirectory)")
    return "\n".join(lines) if lines else "(empty directory)"


def file_tools(roots: Roots) -> list[Tool]:
    path_doc = {"type": "string", "description": f"Path relative to {WORKSPACE} (or absolute under {WORKSPACE}; "
                                                f"{SKILLS} is readable)."}
    return [
        Tool("read_file", f"Read a file under {WORKSPACE} or {SKILLS}. Answers at most {READ_MAX_BYTES} bytes; for "
                          "larger files use 'offset' and 'limit' (lines) as the continuation hint says.",
             schema({"path": path_doc,
                     "offset": {"type": "integer", "description": "1-based line to start at (default 1)."},
                     "limit": {"type": "integer", "description": "Lines to return (default: all, within the cap)."}},
                    ["path"]),
             lambda a: read_file(a, roots), read_only=True),
        Tool("write_file", f"Write a file under {WORKSPACE}, replacing it if it exists; parent directories are "
                           "created.",
             schema({"path": path_doc, "content": {"type": "string", "description": "The whole new content."}},
                    ["path", "content"]),
             lambda a: write_file(a, roots)),
        Tool("edit_file", "Apply exact-string replacements to a file under /workspace, in order and all or nothing. "
                          "Each old_string must match exactly once unless replace_all is set.",
             schema({"path": path_doc, "edits": {"type": "array", "minItems": 1, "items": {
                 "type": "object", "properties": {
                     "old_string": {"type": "string", "description": "The exact text to replace."},
                     "new_string": {"type": "string", "description": "The replacement (empty deletes)."},
                     "replace_all": {"type": "boolean", "description": "Replace every occurrence."}},
                 "required": ["old_string", "new_string"]}}}, ["path", "edits"]),
             lambda a: edit_file(a, roots)),
        Tool("list_directory", f"List a directory under {WORKSPACE} or {SKILLS}: kind, size and name of each entry.",
             schema({"path": path_doc}, ["path"]), lambda a: list_directory(a, roots), read_only=True),
    ]


__all__ = ["READ_MAX_BYTES", "Roots", "apply_edits", "arg_bool", "file_tools", "read_text"]
