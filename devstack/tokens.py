"""Bearer tokens of the local stack (``.local/tokens.json``): ``python -m devstack.tokens add TENANT``.

The local HTTP server plays API Gateway's authorizer: it maps a token to its tenant and puts the
tenant in ``requestContext.authorizer.principalId``, where the api handler reads it in AWS too.
"""

from __future__ import annotations

import json
import secrets
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKENS = ROOT / ".local" / "tokens.json"


def load(path: Path = TOKENS) -> dict[str, str]:
    """token -> tenant."""
    return json.loads(path.read_text()) if path.exists() else {}


def add(tenant: str, path: Path = TOKENS) -> str:
    tokens = load(path)
    token = secrets.token_urlsafe(24)
    tokens[token] = tenant
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(tokens, indent=2))
    return token


def token_for(tenant: str, path: Path = TOKENS) -> str:
    """An existing token of ``tenant``, or a new one."""
    for token, owner in load(path).items():
        if owner == tenant:
            return token
    return add(tenant, path)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "add":
        print(add(sys.argv[2]))
    elif len(sys.argv) == 2 and sys.argv[1] == "list":
        for token, tenant in load().items():
            print(f"{tenant}\t{token}")
    else:
        print("usage: python -m devstack.tokens add TENANT | list", file=sys.stderr)
        raise SystemExit(2)


if __name__ == "__main__":
    main()
