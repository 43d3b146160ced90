"""The server's settings: the `cake` section of the client's configuration.

They arrive twice: as `initializationOptions` when the client starts the server, then
from `workspace/configuration` (and again after each `workspace/didChangeConfiguration`).
Both have the same shape.  A value of the wrong kind is reported to the user and the
previous value kept: a typo in a settings file must never stop the server.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from cake_core.hardware import arch_names, get_arch

SECTION = "cake"


@dataclass(frozen=True, slots=True)
class Settings:
    arch: str | None = None
    """Check every kernel for this arch instead of the one its decorator names."""
    disabled_plugins: frozenset[str] = field(default_factory=frozenset)
    """Verifier passes (by name) and plugins (by origin) not to run."""
    simulate_on_save: bool = False
    """Run `cake.simulate` when a document is saved (once the simulator exists)."""
    nvcc_path: str | None = None
    """The nvcc used by `cake.lower`; None means the one on PATH."""


def parse_settings(raw: object, base: Settings) -> tuple[Settings, list[str]]:
    """`base` updated with the values in `raw`, and a message for each rejected value.

    `raw` is the `cake` section itself or an object holding it under "cake"; keys that
    are absent keep their value from `base`.
    """
    if raw is None:
        return base, []
    if isinstance(raw, Mapping) and isinstance(raw.get(SECTION), Mapping):
        raw = raw[SECTION]
    if not isinstance(raw, Mapping):
        return base, [f"the `{SECTION}` settings must be an object, not {_kind(raw)}"]
    errors: list[str] = []
    s = base
    for key, value in raw.items():
        if key == "arch":
            if value is None or value == "":
                s = replace(s, arch=None)
            elif not isinstance(value, str) or get_arch(value) is None:
                errors.append(f"cake.arch: unknown arch {value!r} "
                              f"(known: {', '.join(arch_names())})")
            else:
                s = replace(s, arch=value)
        elif key == "plugins":
            if not isinstance(value, Mapping):
                errors.append(f"cake.plugins must be an object, not {_kind(value)}")
                continue
            for pkey, pvalue in value.items():
                if pkey != "disabled":
                    errors.append(f"cake.plugins.{pkey} is not a setting")
                elif not isinstance(pvalue, list) or not all(isinstance(x, str) for x in pvalue):
                    errors.append("cake.plugins.disabled must be a list of names")
                else:
                    s = replace(s, disabled_plugins=frozenset(pvalue))
        elif key == "simulateOnSave":
            if not isinstance(value, bool):
                errors.append(f"cake.simulateOnSave must be true or false, not {_kind(value)}")
            else:
                s = replace(s, simulate_on_save=value)
        elif key == "nvccPath":
            if value is not None and not isinstance(value, str):
                errors.append(f"cake.nvccPath must be a path, not {_kind(value)}")
            else:
                s = replace(s, nvcc_path=value or None)
        else:
            errors.append(f"cake.{key} is not a setting")
    return s, errors


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


__all__ = ["SECTION", "Settings", "parse_settings"]
