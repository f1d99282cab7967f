"""The names ``nbagent`` hands on, by the module each lives in.

``nbagent/__init__.py`` loads each on first use (``from nbagent import tool`` imports
``nbagent.tools`` then, not at ``import nbagent``): whole modules of dataclasses, hashing and
asyncio stay unloaded until a name of theirs is asked for. The imports under ``TYPE_CHECKING``
never run; they tell type checkers and editors what each name is (``X as X``: re-exported), and
``tests/test_package.py`` holds them to the table.

A name a person uses in code belongs here (docs/api/index.md says what is public); what only
one feature's users need stays in its documented module (``nbagent.events``,
``nbagent.providers`` …).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..agent import Agent as Agent
    from ..agent import Run as Run
    from ..approvals.approval import ApprovalBinding as ApprovalBinding
    from ..approvals.approval import ApprovalRequest as ApprovalRequest
    from ..approvals.approval import Approver as Approver
    from ..approvals.approval import AutoApprove as AutoApprove
    from ..approvals.approval import CallbackApprover as CallbackApprover
    from ..approvals.approval import Decision as Decision
    from ..approvals.approval import DenyAll as DenyAll
    from ..approvals.approval import InteractiveApprover as InteractiveApprover
    from ..approvals.approval import ScriptedApprover as ScriptedApprover
    from ..approvals.approval import approval_policy as approval_policy
    from ..approvals.approval import approve as approve
    from ..approvals.approval import deny as deny
    from ..approvals.hooks import Veto as Veto
    from ..approvals.hooks import veto as veto
    from ..approvals.rules import ApprovalRule as ApprovalRule
    from ..approvals.rules import RuleApprover as RuleApprover
    from ..approvals.rules import RuleError as RuleError
    from ..approvals.rules import RuleSet as RuleSet
    from ..approvals.rules import parse_rule as parse_rule
    from ..content import ImagePart as ImagePart
    from ..content import TextPart as TextPart
    from ..content import ToolResult as ToolResult
    from ..content import error_result as error_result
    from ..content import image_part as image_part
    from ..content import image_result as image_result
    from ..content import text_and_image_result as text_and_image_result
    from ..content import text_result as text_result
    from ..content import validate_result as validate_result
    from ..document import NotebookDocument as NotebookDocument
    from ..document import NotebookLimits as NotebookLimits
    from ..document import NotebookToolkit as NotebookToolkit
    from ..document import notebook_tools as notebook_tools
    from ..errors import AgentError as AgentError
    from ..errors import AnswerIncompleteError as AnswerIncompleteError
    from ..errors import ArgumentsError as ArgumentsError
    from ..errors import BatchInputError as BatchInputError
    from ..errors import ConfigurationError as ConfigurationError
    from ..errors import ExternalAgentError as ExternalAgentError
    from ..errors import GenerationError as GenerationError
    from ..errors import ImageError as ImageError
    from ..errors import MCPServerError as MCPServerError
    from ..errors import MCPSignInError as MCPSignInError
    from ..errors import NbagentError as NbagentError
    from ..errors import OutputInvalidError as OutputInvalidError
    from ..errors import OutputTypeError as OutputTypeError
    from ..errors import ProviderError as ProviderError
    from ..errors import RunAbortedError as RunAbortedError
    from ..errors import RunFailedError as RunFailedError
    from ..errors import SchemaError as SchemaError
    from ..errors import ToolDefinitionError as ToolDefinitionError
    from ..events import AgentEvent as AgentEvent
    from ..events import RunResult as RunResult
    from ..generation import Answer as Answer
    from ..generation import Generator as Generator
    from ..generation import NamedToolChoice as NamedToolChoice
    from ..generation import Options as Options
    from ..generation import Request as Request
    from ..generation import StreamEvent as StreamEvent
    from ..generation import generate as generate
    from ..inspection.exchange import Exchange as Exchange
    from ..inspection.fork import Comparison as Comparison
    from ..inspection.fork import compare as compare
    from ..inspection.stepping import Resume as Resume
    from ..inspection.stepping import StepEditError as StepEditError
    from ..inspection.stepping import StepPause as StepPause
    from ..inspection.stepping import next_step as next_step
    from ..inspection.stepping import run_to_end as run_to_end
    from ..inspection.stepping import stop_run as stop_run
    from ..kernel import KernelLimits as KernelLimits
    from ..kernel import KernelToolkit as KernelToolkit
    from ..kernel import kernel_tools as kernel_tools
    from ..limits import Budget as Budget
    from ..limits import Limits as Limits
    from ..mcp import MCPLimits as MCPLimits
    from ..mcp import MCPServer as MCPServer
    from ..mcp import OAuth as OAuth
    from ..mcp import mcp_server as mcp_server
    from ..messages import AssistantMessage as AssistantMessage
    from ..messages import Message as Message
    from ..messages import ToolMessage as ToolMessage
    from ..messages import ToolResultPart as ToolResultPart
    from ..messages import UserMessage as UserMessage
    from ..messages import user as user
    from ..models import FunctionModel as FunctionModel
    from ..models import OfflineModel as OfflineModel
    from ..models import ScriptedModel as ScriptedModel
    from ..schema import CompiledSchema as CompiledSchema
    from ..schema import compile_schema as compile_schema
    from ..schema import normalize_schema as normalize_schema
    from ..timeline import Timeline as Timeline
    from ..tools import Definition as Definition
    from ..tools import Tool as Tool
    from ..tools import ToolCall as ToolCall
    from ..tools import ToolContext as ToolContext
    from ..tools import decode_arguments as decode_arguments
    from ..tools import tool as tool
    from ..tools import validate_arguments as validate_arguments
    from ..tools import validate_tools as validate_tools

#: Where each name lives (a module of ``nbagent``) and the names, in the order of the imports above.
_BY_MODULE: dict[str, str] = {
    "agent": "Agent Run",
    "approvals.approval": (
        "ApprovalBinding ApprovalRequest Approver AutoApprove CallbackApprover Decision DenyAll"
        " InteractiveApprover ScriptedApprover approval_policy approve deny"
    ),
    "approvals.hooks": "Veto veto",
    "approvals.rules": "ApprovalRule RuleApprover RuleError RuleSet parse_rule",
    "content": (
        "ImagePart TextPart ToolResult error_result image_part image_result text_and_image_result"
        " text_result validate_result"
    ),
    "document": "NotebookDocument NotebookLimits NotebookToolkit notebook_tools",
    "errors": (
        "AgentError AnswerIncompleteError ArgumentsError BatchInputError ConfigurationError"
        " ExternalAgentError GenerationError ImageError MCPServerError MCPSignInError"
        " NbagentError OutputInvalidError"
        " OutputTypeError ProviderError RunAbortedError RunFailedError SchemaError"
        " ToolDefinitionError"
    ),
    "events": "AgentEvent RunResult",
    "generation": "Answer Generator NamedToolChoice Options Request StreamEvent generate",
    "inspection.exchange": "Exchange",
    "inspection.fork": "Comparison compare",
    "inspection.stepping": "Resume StepEditError StepPause next_step run_to_end stop_run",
    "kernel": "KernelLimits KernelToolkit kernel_tools",
    "limits": "Budget Limits",
    "mcp": "MCPLimits MCPServer OAuth mcp_server",
    "messages": "AssistantMessage Message ToolMessage ToolResultPart UserMessage user",
    "models": "FunctionModel OfflineModel ScriptedModel",
    "schema": "CompiledSchema compile_schema normalize_schema",
    "timeline": "Timeline",
    "tools": (
        "Definition Tool ToolCall ToolContext decode_arguments tool validate_arguments"
        " validate_tools"
    ),
}

#: Name -> the module it is loaded from. (The table's names start with ``_``: the face's star
#: import, for type checkers, takes the imported names only.)
_LAZY: dict[str, str] = {
    name: module for module, names in _BY_MODULE.items() for name in names.split()
}
