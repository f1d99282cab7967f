"""The client program the MCP conformance suite drives, written with nbagent's public API only.

The suite (npm ``@modelcontextprotocol/conformance``, pinned in scripts/test) starts a scripted
MCP server for one scenario and runs ``python conformance_client.py URL``: the server's URL is
the last argument, the scenario's name is in ``MCP_CONFORMANCE_SCENARIO``, the spec version it
plays in ``MCP_CONFORMANCE_PROTOCOL_VERSION`` and, for some scenarios, data (the arguments to
send, credentials) is JSON in ``MCP_CONFORMANCE_CONTEXT``. The suite then judges what reached
its server.

This program does what a person does: ``nbagent.mcp_server(NAME, url=URL)``, then an Agent
whose (offline, scripted) model calls the tools the scenario expects, every call approved. So
each call goes the way a model's call goes: schema check, approval, the MCP call, its result
in the history. Nothing here reads a protocol version or speaks MCP itself: nbagent's client
negotiates whatever the server offers. In the ``auth/*`` scenarios the server asks for OAuth:
``mcp_server(..., auth=OAuth(open_link=follow, ...))`` signs in, with :func:`follow` playing
the person who opens the link (see :func:`oauth` for what each scenario configures).

Exit status: 0 when every planned call got a result that is not an error, 1 when one did not
or the server could not be used, signing in included (why, on stderr), 2 for a scenario this
program does not play (see :data:`NOT_PLAYED`), so the suite's report says the scenario
failed rather than passed.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

import nbagent
from nbagent import Agent, AutoApprove, MCPServer, OAuth, mcp_server
from nbagent.generation import Request
from nbagent.messages import ToolMessage, ToolResultPart
from nbagent.models import Call, FunctionModel, Turn

SERVER = "conformance"

#: Scenarios this program does not play, and why (the how-to's table says the same).
NOT_PLAYED: dict[str, str] = {
    "elicitation-sep1034-client-defaults": (
        "needs elicitation (a server asking the person a question mid-call), which nbagent "
        "does not offer: it declares no elicitation capability, on purpose"
    ),
    "sep-2322-client-request-state": (
        "the server's multi-round requests ask for elicitation input, which nbagent does not "
        "offer (on purpose), so each such call ends as an error result"
    ),
    "auth/client-credentials-jwt": (
        "signs a program in with the client_credentials grant authenticated by a signed JWT "
        "(private_key_jwt, RFC 7523); nbagent's OAuth() offers client_credentials with a "
        "client secret only, and has no setting for a private key"
    ),
    "auth/enterprise-managed-authorization": (
        "needs the enterprise-managed flow (SEP-990: an identity provider's ID token "
        "exchanged for an ID-JAG, then the JWT-bearer grant), which nbagent's OAuth() does "
        "not offer: it signs in with the authorization code flow or client credentials"
    ),
    "auth/dpop": (
        "needs DPoP-bound tokens (SEP-1932, RFC 9449: a key pair and a signed proof on "
        "every request), which nbagent does not offer; it presents Bearer tokens"
    ),
    "auth/dpop-nonce": (
        "is auth/dpop with server-supplied nonces: needs DPoP, which nbagent does not offer"
    ),
    "auth/wif-jwt-bearer": (
        "needs workload identity federation (SEP-1933: the JWT-bearer grant with a workload's "
        "JWT as the assertion), which nbagent's OAuth() does not offer"
    ),
    **{
        f"sep-2640-client-{name}": (
            "judges how a host loads skills (the SEP-2640 extension: skills served as MCP "
            "resources); nbagent reads no resources and loads no skills, so there is nothing "
            "to judge (the suite itself reports SKIPPED)"
        )
        for name in ("no-prefetch", "verify-digest", "verify-size", "verify-frontmatter")
    },
}

Plan = Callable[[MCPServer, Mapping[str, Any]], list[tuple[str, dict[str, Any]]]]


class ScenarioError(Exception):
    """The scenario could not be played as the suite expects (the message says why)."""


def _nothing(server: MCPServer, context: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Connect and list the tools only (what the scenario judges is the handshake or listing)."""
    return []


def _add_numbers(server: MCPServer, context: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [("add_numbers", {"a": 2, "b": 3})]


def _reconnection(
    server: MCPServer, context: Mapping[str, Any]
) -> list[tuple[str, dict[str, Any]]]:
    # The server closes the call's event stream early and answers it on the resumed stream.
    return [("test_reconnection", {})]


def _every_tool(server: MCPServer, context: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Each registered tool once, with no arguments (the scenario's tools take none)."""
    return [(server.origins[tool.name], {}) for tool in server.tools]


def _context_calls(
    server: MCPServer, context: Mapping[str, Any]
) -> list[tuple[str, dict[str, Any]]]:
    """The calls the scenario's context names, with the arguments it gives."""
    calls = context.get("toolCalls")
    if not isinstance(calls, list) or not calls:
        raise ScenarioError("the scenario's context names no toolCalls")
    return [(str(call["name"]), dict(call["arguments"])) for call in calls]


def _valid_tool(server: MCPServer, context: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The listing mixes one valid tool with ten whose x-mcp-header annotations are invalid:
    the valid one must stay usable, the others must never be called. nbagent does not register
    them (so no model can call them); checked here, so the suite's "not called" means that."""
    registered = set(server.origins.values())
    if registered != {"valid_tool"} or not server.rejected:
        raise ScenarioError(
            f"expected only valid_tool registered and the others refused; registered: "
            f"{sorted(registered)}, refused: {list(server.rejected)}"
        )
    return [("valid_tool", {"region": "us-west1"})]


def _schema_echo(server: MCPServer, context: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Send back the input schema nbagent kept for the focal tool: what the model is shown."""
    focal = _tool(server, "json_schema_2020_12_tool")
    return [("json_schema_echo", {"schema": dict(focal.input_schema or {})})]


#: What this program does for each scenario it plays.
PLANS: dict[str, Plan] = {
    "initialize": _nothing,
    "tools_call": _add_numbers,
    "sse-retry": _reconnection,
    "request-metadata": _nothing,
    "http-standard-headers": _every_tool,
    "http-custom-headers": _context_calls,
    "http-invalid-tool-headers": _valid_tool,
    "json-schema-ref-no-deref": _nothing,
    "json-schema-2020-12-preservation": _schema_echo,
}


def _signed_in_call(
    server: MCPServer, context: Mapping[str, Any]
) -> list[tuple[str, dict[str, Any]]]:
    """The auth scenarios' server offers ``test-tool``; reaching it at all needs the sign-in."""
    return [("test-tool", {})]


#: The ``auth/*`` scenarios this program plays: it signs in (see :func:`oauth`), lists the
#: tools and calls ``test-tool``; in some, nbagent must refuse to sign in (then it exits 1).
AUTH_PLAYED = (
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
    "auth/client-credentials-basic",
)
PLANS.update(dict.fromkeys(AUTH_PLAYED, _signed_in_call))


def _tool(server: MCPServer, name: str) -> Any:
    """The nbagent Tool made from the server's tool ``name``, or ScenarioError saying why not."""
    for tool in server.tools:
        if server.origins[tool.name] == name:
            return tool
    refused = [r for r in server.rejected if repr(name) in r]
    why = refused[0] if refused else f"the server did not list it (it listed {server.origins})"
    raise ScenarioError(f"the tool {name!r} is not registered: {why}")


#: The client ID metadata document URL the suite's ``auth/basic-cimd`` authorization server
#: accepts as a client_id (fixed in the suite; it is never fetched).
CIMD_URL = "https://conformance-test.local/client-metadata.json"


def follow(link: str) -> None:
    """Play the person: open the authorization link as a browser would. The suite's
    authorization endpoint redirects at once to the redirect URI with a code; following the
    redirects lands on nbagent's loopback listener, which takes the code (or refuses it)."""
    import httpx2

    httpx2.get(link, follow_redirects=True, timeout=30)


def _given(context: Mapping[str, Any], *names: str) -> list[str]:
    missing = [name for name in names if not isinstance(context.get(name), str)]
    if missing:
        raise ScenarioError(f"the scenario's context gives no {', '.join(missing)}")
    return [str(context[name]) for name in names]


def oauth(scenario: str, context: Mapping[str, Any]) -> OAuth:
    """How this program signs in for an ``auth/*`` scenario, as a person would configure it:
    a client the scenario registered beforehand (its id and secret in the context), a client
    named by its metadata document, a program signing in with client credentials, or (every
    other scenario) nbagent's defaults, the person following the link."""
    if scenario == "auth/pre-registration":
        client_id, secret = _given(context, "client_id", "client_secret")
        return OAuth(open_link=follow, client_id=client_id, client_secret=secret)
    if scenario == "auth/client-credentials-basic":
        client_id, secret = _given(context, "client_id", "client_secret")
        return OAuth(grant="client_credentials", client_id=client_id, client_secret=secret)
    if scenario == "auth/basic-cimd":
        return OAuth(open_link=follow, client_metadata_url=CIMD_URL)
    return OAuth(open_link=follow)


def connect(url: str, scenario: str, context: Mapping[str, Any]) -> MCPServer:
    """The server as nbagent connects to it. In the ``auth/*`` scenarios the server answers
    401 until the client signs in with OAuth, so this signs in as :func:`oauth` says."""
    if scenario.startswith("auth/"):
        return mcp_server(SERVER, url=url, auth=oauth(scenario, context))
    return mcp_server(SERVER, url=url)


class CarefulModel:
    """Plays the planned calls as a model would: all of them in its first turn; then, for each
    call that came back an error while it held ``null`` arguments, the same call once more
    without them (nbagent refuses a ``null`` the tool's schema does not allow before anything
    is sent, and says so; a model reading that leaves the argument out); then it is done."""

    def __init__(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        self.pending = calls
        self.retried = False
        self.model = FunctionModel(self.decide, model="conformance")

    def decide(self, request: Request) -> Turn | str:
        last = request.messages[-1] if request.messages else None
        if not isinstance(last, ToolMessage):
            return Turn(*(Call(name, arguments) for name, arguments in self.pending))
        again = [
            (name, {k: v for k, v in arguments.items() if v is not None})
            for (name, arguments), result in zip(self.pending, last.results, strict=True)
            if result.is_error and None in arguments.values()
        ]
        if again and not self.retried:
            self.retried = True
            self.pending = again
            return Turn(*(Call(name, arguments) for name, arguments in again))
        return "done"


def play(url: str, scenario: str, context: Mapping[str, Any]) -> list[str]:
    """Play one scenario; return one message per planned call that did not succeed."""
    plan = PLANS[scenario]
    with connect(url, scenario, context) as server:
        print(f"registered: {sorted(server.origins.values())}", file=sys.stderr)
        for why in server.rejected:
            print(f"not registered: {why}", file=sys.stderr)
        planned = plan(server, context)
        if not planned:
            return []
        calls = [(_tool(server, name).name, arguments) for name, arguments in planned]
        careful = CarefulModel(calls)
        agent = Agent(careful.model, server.tools, approver=AutoApprove())
        result = agent.run_sync(f"conformance scenario {scenario}")
        final: dict[str, ToolResultPart] = {}  # each tool's last result
        for message in agent.messages:
            if isinstance(message, ToolMessage):
                final.update((r.name, r) for r in message.results)
        problems = [f"{name}: no result" for name, _ in calls if name not in final]
        problems += [f"{r.name}: {r.text}" for r in final.values() if r.is_error]
        if result.stop_reason != "finished":
            problems.append(f"the run ended with {result.stop_reason!r}")
        return problems


def main(argv: list[str]) -> int:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if len(argv) < 2 or not scenario:
        print(
            "usage: MCP_CONFORMANCE_SCENARIO=NAME conformance_client.py SERVER_URL "
            "(the conformance suite sets both)",
            file=sys.stderr,
        )
        return 2
    url = argv[-1]
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    if scenario in NOT_PLAYED:
        print(f"{scenario} is not played: it {NOT_PLAYED[scenario]}", file=sys.stderr)
        return 2
    if scenario not in PLANS:
        print(f"{scenario} is a scenario this client does not know", file=sys.stderr)
        return 2
    print(f"nbagent {nbagent.__version__}: scenario {scenario} against {url}", file=sys.stderr)
    try:
        problems = play(url, scenario, context)
    except (ScenarioError, nbagent.MCPServerError) as exc:
        print(f"{scenario}: {exc}", file=sys.stderr)
        return 1
    for problem in problems:
        print(f"{scenario}: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
