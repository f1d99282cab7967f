"""The suite's tiers: which tests ``scripts/test --fast`` leaves to full runs and CI, and why.

A test is in the fast tier unless a mark below puts it elsewhere. The marks are given here, by
where a test lives or what it runs on, and applied by ``tests/conftest.py`` at collection, so
that a new test lands in its tier by default: a new browser test is a browser test because it
is in ``tests/browser/``, a new kernel test runs on ipykernel 6.29 in full runs only. The marks
are registered in pyproject.toml; ``tests/test_tiers.py`` checks that the fast tier still
imports every module of nbagent.
"""

from __future__ import annotations

from typing import Any

#: The marks that keep a test out of the fast tier, each with what it stands for.
MARKS = {
    "browser": "drives JupyterLab or Notebook 7 in chromium (tests/browser/)",
    "conformance": "plays the npm MCP conformance suite (tests/mcp/test_conformance*.py, "
    "tests/notebook/test_kernel_serve_conformance.py)",
    "real_model": "loads a real model (local:smollm2 through llama.cpp)",
    "slow": "among the slowest tests (8 s or more), or a kernel test on ipykernel 6.29",
}

#: The pytest ``-m`` expression of the fast tier.
FAST = "not (" + " or ".join(MARKS) + ")"

#: Marks by path under tests/: a folder (ending in "/") or a module.
BY_PATH = {
    "browser/": "browser",
    "mcp/test_conformance.py": "conformance",
    "mcp/test_conformance_auth_metadata.py": "conformance",
    "mcp/test_conformance_auth_scopes.py": "conformance",
    "mcp/test_conformance_auth_clients.py": "conformance",
    "mcp/test_conformance_auth_checks.py": "conformance",
    "notebook/test_kernel_serve_conformance.py": "conformance",
    "providers/test_local_server.py": "real_model",
    "notebook/test_kernel_local.py": "real_model",
}

#: Single tests (every parametrization) by module: the tests of the fast tier's modules that took
#: 8 s or more in a full serial run on the project's 2-core machine (--durations=0, Dec 2026),
#: each costing what a hundred others do.
SLOW: dict[str, tuple[str, ...]] = {
    "notebook/test_headless_record.py": (  # one nbclient run of a notebook that serves too
        "test_each_live_run_saved_headless_carries_its_record_and_cost",
        "test_the_class_report_counts_the_headless_runs",
        "test_a_headless_serving_saves_its_served_record",
        "test_an_answer_edited_in_the_saved_file_is_flagged",
    ),
    "kernel/test_toolkit.py": ("test_a_thousand_figures_send_a_few_images_and_close_the_rest",),
    "acp/test_client.py": ("test_an_agent_that_ignores_cancel_is_killed_after_the_grace",),
    "notebook/test_headless_acp.py": (  # nbclient: a kernel and an agent of its own
        "test_a_headless_run_refuses_the_agent_s_permission_request_and_saves_readable",
    ),
    "mcp/test_notebook.py": (
        "test_add_list_run_and_remove_in_a_kernel",
        "test_kernel_shutdown_stops_the_servers",
    ),
    "mcp/test_oauth_notebook.py": (
        "test_a_refresh_refused_mid_session_is_a_clear_result_and_the_rest_goes_on",
        "test_sign_in_from_a_cell_call_refresh_logout_login_and_no_token_anywhere",
    ),
    "notebook/test_record_replay.py": (
        "test_a_changed_tool_result_stops_the_replay_and_says_where",
        "test_record_then_replay_in_a_fresh_kernel_with_no_network",
    ),
    "notebook/test_kernel_restart.py": (  # each starts a kernel and restarts it
        "test_after_a_restart_continue_sends_the_model_what_it_would_have_had",
        "test_a_conversation_that_cannot_be_vouched_for_is_refused_naming_why",
        "test_a_call_waiting_for_approval_across_a_restart_ends_and_is_offered_again",
        "test_the_kernel_toolkit_s_undo_of_a_run_before_the_restart_says_why_not",
        "test_under_a_course_policy_continuing_is_a_run_like_any_other",
        "test_a_typed_run_recorded_from_a_model_set_in_python_continues_as_it_was",
    ),
    "notebook/test_view.py": ("test_growing_redaction_shows_what_redacting_the_whole_text_shows",),
    "providers/test_anthropic_stream.py": ("test_split_at_every_byte_over_the_socket",),
    "providers/test_native_limits.py": (
        "test_openai_takes_5000_properties_natively_and_5001_as_a_tool",
    ),
    "providers/test_responses_stream.py": (
        "test_invalid_utf8_is_replaced_and_damaged_calls_are_marked",
        "test_split_at_every_byte_over_the_socket",
        "test_split_at_every_byte_with_cr_line_ends",
    ),
    "providers/test_wire_quirks.py": (
        "test_empty_data_lines_are_skipped_at_every_split",
        "test_invalid_utf8_is_replaced_and_damaged_calls_are_marked_at_every_split",
    ),
    "terminal/test_cli.py": ("test_a_local_model_that_cannot_load_is_one_clear_error",),
    "terminal/test_interrupts.py": (
        "test_ctrl_c_and_ctrl_d_at_the_prompt",
        "test_ctrl_c_at_the_question_with_prompts_on_the_command_line_exits_130",
        "test_ctrl_c_while_the_model_streams",
    ),
    "terminal/test_previews.py": ("test_the_preview_comes_before_the_question_as_text",),
    "terminal/test_transcript.py": (
        "test_a_failing_tool_shows_its_error_and_the_run_goes_on",
        "test_long_arguments_are_shown_in_full_before_the_question",
        "test_policies_answer_without_asking",
    ),
    "test_batch_dask.py": (
        "test_a_worker_that_dies_has_its_run_retried_elsewhere_or_reported",
        "test_at_most_concurrency_requests_are_in_flight_at_the_server_one_task_per_input",
        "test_keys_come_from_the_workers_environment_never_from_the_task",
        "test_runs_spread_over_the_workers_and_come_back_in_order",
    ),
    "test_content.py": (
        "test_decompression_bomb_is_refused_before_decoding",
        "test_images_too_many_bytes_are_downscaled_to_fit",
    ),
    "test_hints.py": ("test_schema_accepts_what_the_decoder_decodes",),
    "test_lifecycle.py": (
        "test_a_tools_base_exception_is_reraised_after_the_history_is_repaired",
        "test_run_sync_returns_and_the_interpreter_exits",
    ),
    "test_notebooks.py": ("test_notebook_runs_headless",),
    "test_recording.py": (
        "test_a_recording_of_one_huge_text_replays_within_a_small_multiple_of_its_size",
    ),
    "test_rule_values.py": (
        "test_property_a_rule_automaton_reads_a_pattern_as_its_regex_does",
        "test_property_a_value_that_could_name_a_denied_path_is_denied",
        "test_property_comparing_two_rule_globs_agrees_with_every_short_string",
    ),
}
#: And those that load a real model in a module that mostly does not.
REAL_MODEL: dict[str, tuple[str, ...]] = {
    "terminal/test_cli.py": (
        "test_a_local_model_loads_before_the_first_prompt_and_says_so_on_stderr",
    ),
}
BY_TEST: dict[tuple[str, str], str] = {
    **{(path, name): "slow" for path, names in SLOW.items() for name in names},
    **{(path, name): "real_model" for path, names in REAL_MODEL.items() for name in names},
}

#: The kernel tests' second ipykernel (tests/notebook/conftest.py's ``kernel_python``): the
#: same tests again on an older kernel, for full runs.
SLOW_KERNEL_PARAM = ("kernel_python", "ipykernel-6.29")


#: Modules whose tests share nothing costly (no module fixture: each test starts what it plays
#: against), so that pytest-xdist may spread them over its workers; every other module's tests
#: run on one worker, so that its shared kernel or server starts once (scripts/test now uses
#: ``--dist loadfile``, which keeps every module, these too, on one worker in its order).
SPREAD = (
    "mcp/test_conformance.py",
    "mcp/test_conformance_auth_metadata.py",
    "mcp/test_conformance_auth_scopes.py",
    "mcp/test_conformance_auth_clients.py",
    "mcp/test_conformance_auth_checks.py",
    "test_notebooks.py",
)


def marks_for(path: str, name: str, params: dict[str, Any]) -> list[str]:
    """The tier marks of the test ``name`` (without its parameters) in ``path`` (relative to
    tests/, with ``/``), run with fixture ``params``."""
    found = [
        mark
        for where, mark in BY_PATH.items()
        if path == where or (where.endswith("/") and path.startswith(where))
    ]
    mark = BY_TEST.get((path, name))
    if mark:
        found.append(mark)
    key, value = SLOW_KERNEL_PARAM
    if params.get(key) == value:
        found.append("slow")
    return found


#: What a test costs, roughly, in seconds on the project's 2-core machine in a parallel run,
#: by its costliest tier mark, or by its running in a kernel: the figures only order the
#: modules for pytest-xdist, costliest first (:func:`by_cost`), so that no long module starts
#: last and runs on alone while the other workers have nothing left to do. Measured (Dec 2026,
#: -n 2, the machine loaded by other work): a browser module 26-140 s a test, its JupyterLab's
#: start included (a lesson under Run All 15-40 s); a conformance scenario 2.7 s alone, 5-20 s
#: under load; a kernel test 0.7 s on average (0.1 s for a magic line, 5 s for a record and
#: replay); most other tests a few milliseconds. They overrate modules of many quick kernel
#: tests, which then start early, where it costs nothing.
COST = {"browser": 50.0, "real_model": 15.0, "slow": 5.0, "conformance": 4.0, "kernel": 0.5}
#: Any other test.
COST_OTHER = 0.05


def cost(marks: list[str], fixtures: tuple[str, ...]) -> float:
    """The rough cost of one test with these tier marks and fixtures (see :data:`COST`)."""
    if "kernel" in fixtures or "kernel_python" in fixtures:
        marks = [*marks, "kernel"]
    return max((COST[mark] for mark in marks if mark in COST), default=COST_OTHER)


def by_cost(items: list[Any], path_of: Any) -> list[Any]:
    """``items`` module by module, the costliest module first, each module's own order kept
    (stable: pytest's ordering of a module's tests by their fixtures' parameters holds)."""
    totals: dict[str, float] = {}
    for item in items:
        marks = [m.name for m in item.iter_markers() if m.name in MARKS]
        fixtures = tuple(getattr(item, "fixturenames", ()))
        path = path_of(item)
        totals[path] = totals.get(path, 0.0) + cost(marks, fixtures)
    first = {path: index for index, path in enumerate(sorted(totals, key=lambda p: -totals[p]))}
    return sorted(items, key=lambda item: first[path_of(item)])
