"""nbagent: build, watch and teach LLM agents in Jupyter.

The core (tools, schemas, the agent loop, offline models) imports no IPython, ipywidgets or HTTP
client; providers and the notebook front end load on first use. In a notebook::

    %load_ext nbagent

    @nbagent.tool
    def weather(city: str) -> str:
        "Current weather for a city."
        return f"Sunny in {city}"

    %agent What is the weather in "Paris"?
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__ as __version__
from .errors import (
    AgentError,
    AnswerIncompleteError,
    ArgumentsError,
    BatchInputError,
    ConfigurationError,
    GenerationError,
    ImageError,
    MCPServerError,
    MCPSignInError,
    NbagentError,
    OutputInvalidError,
    OutputTypeError,
    ProviderError,
    RunAbortedError,
    RunFailedError,
    SchemaError,
    ToolDefinitionError,
)

if TYPE_CHECKING:
    from .agent import (
        Agent,
        Run,
    )
    from .approvals.approval import (
        ApprovalBinding,
        ApprovalRequest,
        Approver,
        AutoApprove,
        CallbackApprover,
        Decision,
        DenyAll,
        InteractiveApprover,
        ScriptedApprover,
        approval_policy,
        approve,
        deny,
    )
    from .approvals.hooks import (
        Veto,
        veto,
    )
    from .approvals.rules import (
        ApprovalRule,
        RuleApprover,
        RuleSet,
    )
    from .content import (
        ImagePart,
        TextPart,
        ToolResult,
        error_result,
        image_part,
        image_result,
        text_and_image_result,
        text_result,
        validate_result,
    )
    from .events import (
        AgentEvent,
        RunResult,
    )
    from .generation import (
        Answer,
        Generator,
        NamedToolChoice,
        Options,
        Request,
        StreamEvent,
        generate,
    )
    from .kernel import (
        KernelLimits,
        KernelToolkit,
        kernel_tools,
    )
    from .limits import (
        Budget,
        Limits,
    )
    from .mcp import (
        MCPLimits,
        MCPServer,
        OAuth,
        mcp_server,
    )
    from .messages import (
        AssistantMessage,
        Message,
        ToolMessage,
        ToolResultPart,
        UserMessage,
        user,
    )
    from .models import (
        FunctionModel,
        OfflineModel,
        ScriptedModel,
    )
    from .schema import (
        CompiledSchema,
        compile_schema,
        normalize_schema,
    )
    from .timeline import (
        Timeline,
    )
    from .tools import (
        Definition,
        Tool,
        ToolCall,
        ToolContext,
        decode_arguments,
        tool,
        validate_arguments,
        validate_tools,
    )


#: Loaded on first use, so that `import nbagent` stays cheap (whole modules of dataclasses,
#: hashing and asyncio): `from nbagent import tool` or `nbagent.Agent` loads what it needs.
_LAZY = {
    "Agent": "agent",
    "AgentEvent": "events",
    "Answer": "generation",
    "ApprovalBinding": "approvals.approval",
    "ApprovalRequest": "approvals.approval",
    "ApprovalRule": "approvals.rules",
    "Approver": "approvals.approval",
    "AssistantMessage": "messages",
    "AutoApprove": "approvals.approval",
    "CallbackApprover": "approvals.approval",
    "CompiledSchema": "schema",
    "Decision": "approvals.approval",
    "Definition": "tools",
    "DenyAll": "approvals.approval",
    "FunctionModel": "models",
    "Generator": "generation",
    "ImagePart": "content",
    "InteractiveApprover": "approvals.approval",
    "KernelLimits": "kernel",
    "KernelToolkit": "kernel",
    "Limits": "limits",
    "Budget": "limits",
    "Timeline": "timeline",
    "MCPLimits": "mcp",
    "MCPServer": "mcp",
    "OAuth": "mcp",
    "Message": "messages",
    "NamedToolChoice": "generation",
    "OfflineModel": "models",
    "Options": "generation",
    "Request": "generation",
    "RuleApprover": "approvals.rules",
    "RuleSet": "approvals.rules",
    "Run": "agent",
    "RunResult": "events",
    "ScriptedApprover": "approvals.approval",
    "ScriptedModel": "models",
    "StreamEvent": "generation",
    "TextPart": "content",
    "Tool": "tools",
    "ToolCall": "tools",
    "ToolContext": "tools",
    "ToolMessage": "messages",
    "ToolResult": "content",
    "ToolResultPart": "messages",
    "UserMessage": "messages",
    "Veto": "approvals.hooks",
    "approval_policy": "approvals.approval",
    "approve": "approvals.approval",
    "compile_schema": "schema",
    "decode_arguments": "tools",
    "deny": "approvals.approval",
    "error_result": "content",
    "generate": "generation",
    "image_part": "content",
    "image_result": "content",
    "kernel_tools": "kernel",
    "mcp_server": "mcp",
    "normalize_schema": "schema",
    "text_and_image_result": "content",
    "text_result": "content",
    "tool": "tools",
    "user": "messages",
    "validate_arguments": "tools",
    "validate_result": "content",
    "validate_tools": "tools",
    "veto": "approvals.hooks",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nbagent' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "Agent",
    "AgentError",
    "AgentEvent",
    "Answer",
    "AnswerIncompleteError",
    "ApprovalBinding",
    "ApprovalRequest",
    "ApprovalRule",
    "Approver",
    "ArgumentsError",
    "AssistantMessage",
    "AutoApprove",
    "BatchInputError",
    "Budget",
    "CallbackApprover",
    "CompiledSchema",
    "ConfigurationError",
    "Decision",
    "Definition",
    "DenyAll",
    "FunctionModel",
    "GenerationError",
    "Generator",
    "ImageError",
    "ImagePart",
    "InteractiveApprover",
    "KernelLimits",
    "KernelToolkit",
    "Limits",
    "MCPLimits",
    "MCPServer",
    "MCPServerError",
    "MCPSignInError",
    "Message",
    "NamedToolChoice",
    "NbagentError",
    "OAuth",
    "OfflineModel",
    "Options",
    "OutputInvalidError",
    "OutputTypeError",
    "ProviderError",
    "Request",
    "RuleApprover",
    "RuleSet",
    "Run",
    "RunAbortedError",
    "RunFailedError",
    "RunResult",
    "SchemaError",
    "ScriptedApprover",
    "ScriptedModel",
    "StreamEvent",
    "TextPart",
    "Timeline",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolDefinitionError",
    "ToolMessage",
    "ToolResult",
    "ToolResultPart",
    "UserMessage",
    "Veto",
    "allow",
    "approval_policy",
    "approve",
    "compile_schema",
    "current_session",
    "decode_arguments",
    "deny",
    "error_result",
    "forbid",
    "generate",
    "image_part",
    "image_result",
    "kernel_tools",
    "load_ipython_extension",
    "mcp_server",
    "normalize_schema",
    "register",
    "serve",
    "text_and_image_result",
    "text_result",
    "tool",
    "unload_ipython_extension",
    "user",
    "validate_arguments",
    "validate_result",
    "validate_tools",
    "veto",
]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext nbagent``: register the magics (the notebook front end loads only now)."""
    from .notebook import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext nbagent``."""
    from .notebook import unload_ipython_extension as unload

    unload(ipython)


def current_session() -> Any:
    """The notebook session of this kernel (tools, conversation, settings); loads the front end."""
    from .notebook import current_session as session

    return session()


def register(*tools: Any, **kwargs: Any) -> Any:
    """Register tools with the notebook session (see :func:`nbagent.notebook.register`)."""
    from .notebook import register as notebook_register

    return notebook_register(*tools, **kwargs)


def allow(tool: Any, *, when: Any = None, **where: Any) -> int:
    """Allow calls to ``tool`` in this notebook without asking, all of them or those whose
    arguments match (``allow("write_file", path="data/*")``; see :mod:`nbagent.approvals.rules`).
    The rule is checked against the registered tool now; returns its number (``%agent rules``)."""
    from .notebook import current_session as session

    return int(session().allow(tool, when=when, **where))


def forbid(tool: Any, *, when: Any = None, **where: Any) -> int:
    """Deny calls to ``tool`` in this notebook, all of them or those whose arguments match: the
    Python twin of ``%agent deny`` (``nbagent.deny`` makes a Decision). Returns its number."""
    from .notebook import current_session as session

    return int(session().deny(tool, when=when, **where))


def serve(
    *, kernel: bool = False, approve: str | None = None, port: int = 0, expose: str | None = None
) -> Any:
    """Serve this notebook's tools over MCP, as ``%agent serve`` does (``kernel``: the kernel
    tools too; ``approve="auto"``: without asking, said once; ``expose``: an address beyond
    loopback). Returns what is served (``.url``, ``.token``, ``.stop()``); if something is
    served already, that. See docs/howto/serve.md: there is no sandbox."""
    from .notebook import current_session as session
    from .notebook.serving import serve as start

    return start(session(), kernel=kernel, approve=approve, port=port, expose=expose)
