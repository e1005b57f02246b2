"""Teams of the recall world: the roles of each domain, their authority (0..1) and a
one-line brief for each role's system prompt.

Authority is what the lightweight retrieval condition weighs (beta) and what the
invalidation rule compares, so these numbers are part of the experiment's design,
not decoration; they follow the source study's three domains."""
from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

#: The scenario narrator: may speak in any domain, is never asked to recall.
NARRATOR = "user"
NARRATOR_AUTHORITY = 0.5
#: Author role of the preloaded initial facts (the case file / chart / mandate).
RECORD = "record"

_DOMAINS: dict[str, dict[str, float]] = {
    "legal": {
        "senior_lawyer": 1.0,
        "associate": 0.7,
        "paralegal": 0.4,
        "external_counsel": 0.9,
        "client_rep": 0.2,
    },
    "medical": {
        "attending_physician": 1.0,
        "resident": 0.6,
        "nurse": 0.4,
        "pharmacist": 0.8,
        "patient": 0.0,
    },
    "finance": {
        "portfolio_manager": 1.0,
        "financial_analyst": 0.75,
        "risk_officer": 0.85,
        "trader": 0.6,
        "compliance_officer": 0.8,
    },
}

#: domain -> role -> authority. Read-only views so nobody edits the design by accident.
DOMAINS: Mapping[str, Mapping[str, float]] = MappingProxyType(
    {d: MappingProxyType(roles) for d, roles in _DOMAINS.items()}
)

ROLE_BRIEFS: Mapping[str, Mapping[str, str]] = MappingProxyType({
    "legal": MappingProxyType({
        "senior_lawyer": "You are the senior lawyer leading the matter; you make the final calls on strategy and dates.",
        "associate": "You are an associate lawyer drafting filings and tracking the matter's details for the senior lawyer.",
        "paralegal": "You are the paralegal who keeps the docket, prepares exhibits and updates the matter file.",
        "external_counsel": "You are external counsel brought in for specialist advice on this matter.",
        "client_rep": "You are the client's representative; you relay the client's wishes and information.",
    }),
    "medical": MappingProxyType({
        "attending_physician": "You are the attending physician responsible for this patient's plan of care.",
        "resident": "You are the resident physician carrying out and documenting the plan of care.",
        "nurse": "You are the bedside nurse giving medications and recording observations.",
        "pharmacist": "You are the clinical pharmacist who checks doses, interactions and the medication record.",
        "patient": "You are the patient; you describe how you feel and what you were told.",
    }),
    "finance": MappingProxyType({
        "portfolio_manager": "You are the portfolio manager who owns the fund's positions and final allocation decisions.",
        "financial_analyst": "You are the financial analyst who models companies and prepares the figures for decisions.",
        "risk_officer": "You are the risk officer who sets and monitors the fund's risk limits.",
        "trader": "You are the trader who executes orders and reports fills and market levels.",
        "compliance_officer": "You are the compliance officer who checks mandates, restrictions and regulatory limits.",
    }),
})


def domain_roles(domain: str) -> Mapping[str, float]:
    """The roles of one domain; KeyError naming the known domains otherwise."""
    try:
        return DOMAINS[domain]
    except KeyError:
        raise KeyError(f"unknown domain {domain!r}; known domains: {', '.join(sorted(DOMAINS))}") from None


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
        raise KeyError(f"unknown role {role!r} in domain {domain!r}; known roles: {known}") from None
