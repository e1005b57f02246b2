"""Teams of the recall world: the roles of each domain, their authority (0..1) and a
one-line brief for each role's system prompt.

They are data, not code: ``data/domains.yaml`` beside this module (the source study's
three domains), read and validated once on import. A malformed file is refused with
one line naming the file and the field (``domains.yaml: domains.legal.paralegal.authority:
expected a number from 0 to 1 (got 1.4)``); :func:`load_domains` reads another file
the same way.

Authority is what the lightweight retrieval condition weighs (beta) and what the
invalidation rule compares, so these numbers are part of the experiment's design,
not decoration."""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from workbench.errors import UnknownNameError
from workbench.inputs import InputFileError

DOMAINS_FILE = Path(__file__).with_name("data") / "domains.yaml"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class DomainsError(InputFileError):
    """A teams file that cannot be used; ``str(err)`` names the file and the field."""


@dataclass(frozen=True)
class Teams:
    """What a teams file defines (read-only mappings, so nobody edits the design by accident)."""

    narrator: str
    narrator_authority: float
    record: str
    authority: Mapping[str, Mapping[str, float]]  # domain -> role -> authority
    briefs: Mapping[str, Mapping[str, str]]  # domain -> role -> brief
    path: str


def _show(value: Any) -> str:
    return repr(value)[:80]


def _authority(path: Path, where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise DomainsError(path, where, f"expected a number from 0 to 1 (got {_show(value)})")
    return float(value)


def _name(path: Path, where: str, value: Any, what: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise DomainsError(path, where, f"expected {what}: lower-case letters, digits and _ (got {_show(value)})")
    return value


def _mapping(path: Path, where: str, value: Any, allowed: set[str] | None = None,
             required: tuple[str, ...] = ()) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DomainsError(path, where, f"expected a mapping (got {_show(value)})")
    if allowed is not None:
        for key in value:
            if key not in allowed:
                raise DomainsError(path, f"{where}.{key}" if where else str(key),
                                   f"unknown field (expected one of: {', '.join(sorted(allowed))})")
    for key in required:
        if key not in value:
            raise DomainsError(path, f"{where}.{key}" if where else key, "required field is missing")
    return value


def teams_from_dict(data: Any, path: str | Path = "<dict>") -> Teams:
    """Validate a parsed teams file; DomainsError names ``path`` and the field."""
    p = Path(path)
    top = _mapping(p, "", data, {"narrator", "record", "domains"}, ("narrator", "record", "domains"))
    narr = _mapping(p, "narrator", top["narrator"], {"role", "authority"}, ("role", "authority"))
    narrator = _name(p, "narrator.role", narr["role"], "a role name")
    narrator_authority = _authority(p, "narrator.authority", narr["authority"])
    record = _name(p, "record", top["record"], "a role name")
    if record == narrator:
        raise DomainsError(p, "record", f"the record's role must differ from the narrator's ({narrator!r})")
    domains = _mapping(p, "domains", top["domains"])
    if not domains:
        raise DomainsError(p, "domains", "expected at least one domain (got none)")
    authority: dict[str, Mapping[str, float]] = {}
    briefs: dict[str, Mapping[str, str]] = {}
    for domain, roles in domains.items():
        where = f"domains.{domain}"
        _name(p, where, domain, "a domain name")
        roles = _mapping(p, where, roles)
        if len(roles) < 2:
            raise DomainsError(p, where, f"expected a team of at least 2 roles (got {len(roles)})")
        auth: dict[str, float] = {}
        brief: dict[str, str] = {}
        for role, body in roles.items():
            rwhere = f"{where}.{role}"
            _name(p, rwhere, role, "a role name")
            if role in (narrator, record):
                raise DomainsError(p, rwhere, f"{role!r} is reserved (the narrator is {narrator!r}, the record {record!r})")
            body = _mapping(p, rwhere, body, {"authority", "brief"}, ("authority", "brief"))
            auth[role] = _authority(p, f"{rwhere}.authority", body["authority"])
            if not isinstance(body["brief"], str) or not body["brief"].strip():
                raise DomainsError(p, f"{rwhere}.brief", f"expected a non-empty string (got {_show(body['brief'])})")
            brief[role] = body["brief"].strip()
        authority[domain] = MappingProxyType(auth)
        briefs[domain] = MappingProxyType(brief)
    return Teams(narrator, narrator_authority, record, MappingProxyType(authority), MappingProxyType(briefs), str(p))


def load_domains(path: str | Path = DOMAINS_FILE) -> Teams:
    """Read and validate a teams file (YAML); syntax errors name the line."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise DomainsError(p, "", "file not found (expected the recall world's teams, YAML)")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise DomainsError(p, where, f"not valid YAML ({getattr(exc, 'problem', None) or exc})") from None
    return teams_from_dict(data, p)


TEAMS = load_domains()
#: The scenario narrator: may speak in any domain, is never asked to recall.
NARRATOR = TEAMS.narrator
NARRATOR_AUTHORITY = TEAMS.narrator_authority
#: Author role of the preloaded initial facts (the case file / chart / mandate).
RECORD = TEAMS.record
#: domain -> role -> authority.
DOMAINS: Mapping[str, Mapping[str, float]] = TEAMS.authority
#: domain -> role -> one-line brief for the role's system prompt.
ROLE_BRIEFS: Mapping[str, Mapping[str, str]] = TEAMS.briefs


def domain_roles(domain: str) -> Mapping[str, float]:
    """The roles of one domain; KeyError naming the known domains otherwise."""
    try:
        return DOMAINS[domain]
    except KeyError:
        raise UnknownNameError(f"unknown domain {domain!r}; known domains: {', '.join(sorted(DOMAINS))}") from None


def role_authority(domain: str, role: str) -> float:
    """Authority of ``role`` in ``domain`` (the narrator ``user`` has 0.5).

    Raises KeyError naming the known roles, so a typo in a script or a study is
    reported with what would have been accepted."""
    roles = domain_roles(domain)
    if role == NARRATOR:
        return NARRATOR_AUTHORITY
    try:
        return roles[role]
    except KeyError:
        known = ", ".join([*roles, NARRATOR])
        raise UnknownNameError(f"unknown role {role!r} in domain {domain!r}; known roles: {known}") from None
