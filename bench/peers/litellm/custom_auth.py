"""LiteLLM custom auth for the modelgate benchmark peer (general_settings.custom_auth).

LiteLLM's own virtual keys live in PostgreSQL behind Prisma, which cannot run here (../README.md), so
keys come from the same data.json as the OPA peer (bench/e2e/peer-data.ts): one dict lookup by the
key's SHA-256. This function does what modelgate checks before the model (key, disabled, expiry, group)
plus the balance, and returns a UserAPIKeyAuth whose `models` is the group's available models;
LiteLLM itself then enforces the model allowlist (enable_post_custom_auth_checks +
custom_auth_run_common_checks, as its custom-auth docs require for a key model allowlist).

With MODELGATE_PEER_BUDGET=1 (setup litellm-budget) the key's balance becomes the returned object's
`max_budget` (with `spend` 0) and LiteLLM enforces it itself: its budget reservation after the common
checks (litellm/proxy/spend_tracking/budget_reservation.py) reads and reserves the key's spend counter
`spend:key:<token>` and raises BudgetExceededError once the spend reaches `max_budget`; LiteLLM's own
cost callback (spend_tracking.py) prices each response from its model cost map and adds it to that
counter. This function then checks only what has no LiteLLM counterpart here (a balance of 0).

Env: MODELGATE_PEER_DATA, the data.json to read (set by bench/e2e/setups.ts); MODELGATE_PEER_BUDGET.
"""
import hashlib
import json
import os
import time

from fastapi import Request
from litellm.proxy._types import LitellmUserRoles, ProxyException, UserAPIKeyAuth

_DATA_PATH = os.environ["MODELGATE_PEER_DATA"]
with open(_DATA_PATH) as f:
    _DATA = json.load(f)["modelgate"]
_KEYS = _DATA["keys"]
_GROUPS = _DATA["groups"]
# Per group, the models a key may name: available ones only (modelgate: model_unavailable).
_GROUP_MODELS = {
    name: sorted(m for m, spec in g["models"].items() if spec["available"]) for name, g in _GROUPS.items()
}
# Setup litellm-budget: the balance is LiteLLM's max_budget, enforced by LiteLLM (see above).
_LITELLM_BUDGET = os.environ.get("MODELGATE_PEER_BUDGET") == "1"
_BEARER = ("authorization", "x-api-key")
_VENDOR = ("x-vendor-api-key", "x-goog-api-key")


def _deny(status: int, reason: str, message: str) -> ProxyException:
    return ProxyException(
        message=f"{message} [modelgate: {reason}]",
        type="authentication_error" if status == 401 else "permission_error",
        param=None,
        code=status,
        headers={"x-modelgate-reason": reason},
        openai_code=reason,
    )


def _key_from_headers(request: Request) -> str:
    """The key from the headers modelgate reads on this route (/v1beta, and LiteLLM's /gemini
    pass-through: vendor headers)."""
    path = request.url.path
    names = _VENDOR if path.startswith(("/v1beta/", "/gemini/")) else _BEARER
    for name in names:
        value = request.headers.get(name)
        if not value:
            continue
        if name == "authorization":
            if value[:7].lower() != "bearer ":
                continue
            value = value[7:].strip()
        if value:
            return value
    return ""


async def user_api_key_auth(request: Request, api_key: str) -> UserAPIKeyAuth:
    key = _key_from_headers(request)
    if not key:
        raise _deny(401, "key_missing", "no key in the headers this endpoint reads")
    digest = hashlib.sha256(key.encode()).hexdigest()
    rec = _KEYS.get(digest)
    if rec is None:
        raise _deny(401, "key_unknown", "no key matches")
    if rec["disabled"]:
        raise _deny(401, "key_disabled", "the key is disabled")
    exp = rec["expires_at_ns"]
    if exp is not None and exp <= time.time_ns():
        raise _deny(401, "key_expired", "the key has expired")
    group = _GROUPS.get(rec["group"])
    if group is None or not group["available"]:
        raise _deny(403, "group_unavailable", "the key's group is unavailable")
    # modelgate checks the balance after the model; LiteLLM checks the model after this function.
    balance = rec["balance"]
    if balance is not None and balance <= 0:
        raise _deny(403, "balance_insufficient", "the key's balance is used up")
    # LiteLLM's budget: a max_budget of 0 is "no budget" to LiteLLM (hence the check above).
    budget = {"max_budget": float(balance), "spend": 0.0} if _LITELLM_BUDGET and balance is not None else {}
    return UserAPIKeyAuth(
        token=digest,
        key_alias=rec["id"],
        user_id=rec["id"],
        user_role=LitellmUserRoles.INTERNAL_USER,
        models=_GROUP_MODELS[rec["group"]],
        metadata={"group": rec["group"]},
        **budget,
    )
