"""``rewardkit audit``: what will the policy find? Honest and attack variants generated from
each of the user's rows, scored by the user's own reward (a name, a composition, or a served
reward), reported per family: the share of honest variants paid (false zeros) and of attacks
paid, with bootstrap intervals, the worst examples and a verdict.

Families are small generator functions (:func:`family` registers a new one); the audit uses
the other rooms through their public faces only (``rewardkit.load``, ``Scorer.score``), so
code runs only in the ``code`` reward's sandbox and a served reward keeps its server's limits.
"""
from .families import ATTACK, FAMILIES, HONEST, KINDS, AuditRow, Family, families_for, family
from .rows import AuditInputError, RowFields, detect_kind, read_audit_rows, to_audit_row
from .runner import AuditOptions, AuditResult, FamilyResult, choose_families, plan, run_audit, \
    score_variants, summarise

__all__ = ["ATTACK", "HONEST", "KINDS", "FAMILIES", "AuditRow", "Family", "family",
           "families_for", "AuditInputError", "RowFields", "detect_kind", "read_audit_rows",
           "to_audit_row", "AuditOptions", "AuditResult", "FamilyResult", "choose_families",
           "plan", "run_audit", "score_variants", "summarise"]
