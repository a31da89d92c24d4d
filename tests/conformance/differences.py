"""Where our loop intentionally differs from the published Terminus-2, and why.

The suite compares everything else case by case. The parser list is empty: every parser case
must agree with both reference parsers (tests/conformance/test_parser.py).
"""

INTENDED: dict[str, list[tuple[str, str]]] = {
    "parser": [],
    "loop": [
        (
            "token counting",
            "Terminus-2 counts with litellm's token_counter (a tiktoken estimate for a served checkpoint's name) "
            "against litellm's model info (1,000,000 for unknown names unless harbor gets model_info); we count "
            "the student's tokens of what the model is shown against eval.context_length.",
        ),
        (
            "proactive threshold",
            "terminal-bench hard-codes 8,000 free tokens; we use eval.summarize_threshold (default 8,000) for "
            "both styles.",
        ),
        (
            "errors of the endpoint",
            "both retry a failing model call inside the agent (tenacity, 3 attempts); an endpoint error here is "
            "an infrastructure error: the whole attempt is retried (eval.max_infra_retries) and recorded as "
            "infra_error if it persists. Summary failures are retried as terminal-bench does.",
        ),
        (
            "terminal-bench crashes",
            "where terminal-bench's agent raises (a failed proactive summary, an overflow it cannot recover "
            "after three tries) the attempt ends with ended=context_length; the tests run in both.",
        ),
        (
            "agent timeout",
            "theirs cancels the agent coroutine/thread; ours checks the deadline between episodes and cuts "
            "waits at it (a model call in flight is bounded by its own timeout).",
        ),
        (
            "harbor's canned answer",
            "when the handoff cannot be sent, harbor parses a fixed apology text; we parse an empty answer: both "
            "hold no JSON and give the same error turn.",
        ),
        (
            "instruction extras",
            "harbor appends MCP-server and skills text to the instruction when a task configures them; tasks "
            "here have none.",
        ),
    ],
    "terminal": [
        (
            "shell",
            "terminal-bench starts the container's default shell; we start `bash --login` (as harbor).",
        ),
        (
            "recording",
            "harbor records with asciinema and clears the screen before the first prompt when asciinema is "
            "installed; we record nothing, so the first screen shows the shell prompt as started.",
        ),
        (
            "commands as argv",
            "harbor runs shell command strings (keys shlex-quoted, paste chunks through printf); we pass the "
            "same tokens as argv (compared after splitting and decoding theirs).",
        ),
        ("session name", "harbor names the tmux session terminus-2, terminal-bench agent; ours is agent."),
    ],
    "prompts": [
        (
            "too-long limit",
            "harbor's too-long turn quotes the model's max_output_tokens from its model_info; ours quotes "
            "eval.sampling.max_tokens (terminal-bench always says 4096, and so do we in its wording).",
        ),
    ],
}
