"""The course policy file: found from the notebook upward or by NBAGENT_COURSE_POLICY, read
strictly (every mistake names the file and the key), sections applied by glob."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest

from nbagent.course.policy import CoursePolicyError, Limit, find_policy, load_policy

FULL = """\
version = 1
course = { name = "Data 101" }
ai = true
models = ["openai:gpt-4.1-*", "anthropic:claude-*"]
default_model = "openai:gpt-4.1-mini"
live = true
kernel_tools = false
mcp = false
auto_approve = false

[budget.run]
tokens = 20000
requests = 20
usd = 0.05

[budget.session]
usd = 1

[[notebooks]]
match = "exams/*.ipynb"
ai = false
message = "This is the exam: AI is off."

[[notebooks]]
match = ["labs/**", "extra/*.ipynb"]
live = false
[notebooks.budget.run]
tokens = 500
"""


def write(folder: Path, text: str) -> Path:
    path = folder / "nbagent-course.toml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_every_key_reads_and_sections_apply_by_glob(tmp_path: Path) -> None:
    policy = load_policy(write(tmp_path, FULL))
    assert policy.digest == "sha256:" + hashlib.sha256(FULL.encode()).hexdigest()
    top = policy.for_notebook("lesson.ipynb")
    assert top.ai and top.live and not top.kernel_tools and not top.mcp and not top.auto_approve
    assert top.model_allowed("openai:gpt-4.1-nano") and not top.model_allowed("openai:gpt-4o")
    assert top.budget("run") == Limit(20000, 20, 0.05)
    assert top.budget("session") == Limit(None, None, 1.0)
    exam = policy.for_notebook("exams/final.ipynb")
    assert not exam.ai and exam.message == "This is the exam: AI is off."
    assert exam.origin["ai"] == "notebooks[1].ai"
    assert policy.for_notebook("exams/sub/final.ipynb").ai  # * stays within a folder
    lab = policy.for_notebook("labs/week1/a.ipynb")
    assert not lab.live and lab.budget("run") == Limit(500, 20, 0.05)
    assert lab.origin["budget.run.tokens"] == "notebooks[2].budget.run.tokens"
    assert lab.origin["budget.run.usd"] == "budget.run.usd"
    # the notebook's name unknown: a section applies by its glob's folder
    assert not policy.for_notebook(None, "exams").ai
    assert policy.for_notebook(None, "").ai


def test_a_glob_names_the_same_notebooks_in_every_students_folder(tmp_path: Path) -> None:
    """A course laid out by student: ``exams/*.ipynb`` is each student's exams/ folder, in the
    kernel (paths from the policy's folder) as in the class report (from the student's)."""
    policy = load_policy(write(tmp_path, FULL))
    for path in ("exams/final.ipynb", "submissions/ann/exams/final.ipynb", "ann/exams/a.ipynb"):
        assert not policy.for_notebook(path).ai, path
    assert policy.for_notebook("submissions/ann/exams/sub/final.ipynb").ai  # * stays in one
    assert policy.for_notebook("submissions/ann/myexams/final.ipynb").ai  # a folder's whole name
    assert not policy.for_notebook("submissions/ann/labs/week1/a.ipynb").live
    assert not policy.for_notebook(None, "submissions/ann/exams").ai
    # a notebook outside the policy's folder (a hub's NBAGENT_COURSE_POLICY): its whole path
    assert not policy.for_notebook("/home/ann/exams/final.ipynb", inside=False).ai
    assert policy.for_notebook("/home/ann/final.ipynb", inside=False).ai
    # "/" first: from the policy's folder only
    anchored = load_policy(write(tmp_path, '[[notebooks]]\nmatch = "/exams/*.ipynb"\nai = false\n'))
    assert not anchored.for_notebook("exams/final.ipynb").ai
    assert anchored.for_notebook("submissions/ann/exams/final.ipynb").ai
    assert anchored.for_notebook("/home/ann/exams/final.ipynb", inside=False).ai
    assert not anchored.for_notebook(None, "exams").ai and anchored.for_notebook(None, "a/exams").ai


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("ai = 1\n", "ai: must be true or false"),
        ("budgett = 3\n", "budgett: unknown key"),
        ("version = 2\n", "version: this nbagent reads version 1"),
        ('models = "openai:*"\n', "models: must be a list"),
        ('models = ["open ai"]\n', "models: 'open ai' is not a model string"),
        ('models = ["openai:[ab]"]\n', "model globs take * and ? only"),
        ('default_model = "openai:gpt-4o"\nmodels = ["anthropic:*"]\n', "default_model:"),
        ("[budget.run]\ntokens = 0\n", "budget.run.tokens: must be a positive whole number"),
        ("[budget.run]\ntokens = true\n", "budget.run.tokens: must be a positive whole number"),
        ("[budget.run]\nusd = -1\n", "budget.run.usd: must be a positive number of dollars"),
        ("[budget.run]\nusd = nan\n", "budget.run.usd: must be a positive number"),
        ("[budget.week]\ntokens = 3\n", "budget.week: unknown budget"),
        ("[budget.run]\ndollars = 3\n", "budget.run.dollars: unknown key"),
        ("[[notebooks]]\nai = false\n", "notebooks[1]: needs `match`"),
        ('[[notebooks]]\nmatch = "//abs/*.ipynb"\n', "must be relative to the policy's folder"),
        ('[[notebooks]]\nmatch = "~/x/*.ipynb"\n', "must be relative to the policy's folder"),
        ('[[notebooks]]\nmatch = "../x/*.ipynb"\n', "may not hold '.' or '..'"),
        ('[[notebooks]]\nmatch = "exams/[ab].ipynb"\n', "takes *, ** and ? only"),
        ('[[notebooks]]\nmatch = "exams/notes.txt"\n', "names no notebook"),
        ("[[notebooks]]\nmatch = []\n", "notebooks[1].match: must be a glob"),
        ('[[notebooks]]\nmatch = "a/*"\ncolour = "red"\n', "notebooks[1].colour: unknown key"),
        ("ai = \n", "not valid TOML"),
        ('message = ""\n', "message: must be a non-empty string"),
    ],
)
def test_a_mistake_names_the_file_and_the_key(tmp_path: Path, text: str, words: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(CoursePolicyError) as caught:
        load_policy(path)
    assert str(path) in str(caught.value)
    assert words in str(caught.value)


def test_a_toml_error_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "ai = true\nlive = \n")
    with pytest.raises(CoursePolicyError, match="line 2"):
        load_policy(path)


def test_a_huge_or_binary_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "nbagent-course.toml"
    path.write_bytes(b"# " + b"x" * (300 * 1024))
    with pytest.raises(CoursePolicyError, match="over 256 KiB"):
        load_policy(path)
    path.write_bytes(b"ai = \xff\n")
    with pytest.raises(CoursePolicyError, match="not UTF-8"):
        load_policy(path)
    with pytest.raises(CoursePolicyError, match="cannot be read"):
        load_policy(tmp_path / "missing.toml")


def test_found_from_the_notebooks_folder_upward_or_named_by_the_environment(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, "ai = true\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_policy(deep, {}) == path
    assert find_policy(tmp_path.parent, {}) is None or find_policy(tmp_path.parent, {}) != path
    elsewhere = tmp_path / "hub.toml"
    assert find_policy(deep, {"NBAGENT_COURSE_POLICY": str(elsewhere)}) == elsewhere
    assert find_policy(deep, {"NBAGENT_COURSE_POLICY": "  "}) == path
