"""TOR (our reconstruction) on hand-built trajectories whose value is counted by hand, the shell parsing
under it, and the streaming statistics pass."""

import json
import math
import shlex

import pyarrow.parquet as pq
import pytest

from horizon.data.commands import OBSERVATION_COMMANDS, parse_keystrokes, tokens
from horizon.data.quality import trajectory_quality, write_quality
from horizon.terminus import Command, render_response

OBSERVE = frozenset(OBSERVATION_COMMANDS)
PROMPT = "root@box:/app# "


def step(*keystrokes, done=False):
    return {
        "role": "assistant",
        "content": render_response("a", "p", [Command(k, 0.1) for k in keystrokes], done),
    }


def screen(*lines):
    return {"role": "user", "content": "New Terminal Output:\n" + "\n".join(lines) + "\n" + PROMPT}


def traj(*turns):
    return [
        {"role": "user", "content": "Task Description:\nCount the rows of data.csv into count.txt.\n"},
        *turns,
    ]


def tor(conv):
    return trajectory_quality(conv, OBSERVE)[0]


def kinds(keystrokes, **kw):
    return [(u.kind, u.names) for u in parse_keystrokes(keystrokes, OBSERVE, **kw)]


# ---------------------------------------------------------------------------------------------
# the shell side


def test_pipelines_chains_and_redirections_split_into_units():
    # one pipeline that writes a file (an action), a chain of three, a background job
    assert kinds("tail -n +2 data.csv | wc -l > count.txt\n") == [("action", ["tail", "wc"])]
    assert kinds("cd /app && ls -la; cat notes.txt || pwd\n") == [
        ("action", ["cd"]), ("observation", ["ls"]), ("observation", ["cat"]), ("observation", ["pwd"]),
    ]  # fmt: skip
    assert kinds("grep -rn TODO . 2>&1 | head -5\n") == [("observation", ["grep", "head"])]
    assert kinds("ls > /dev/null 2>&1 &\n") == [("observation", ["ls"])]  # /dev/null is not a file written
    assert kinds("find . -name '*.log' -delete\n") == [("action", ["find"])]  # find that deletes
    assert kinds("echo $(cat f | wc -l)\n") == [("action", ["echo"]), ("observation", ["cat", "wc"])]
    assert kinds("sudo FOO=1 env BAR=2 python3 x.py\n") == [("action", ["python3"])]


def test_quotes_heredocs_and_comments():
    # operators inside quotes are arguments, not operators
    units = parse_keystrokes("grep -c '|' a.txt && echo \"a;b\" > c.txt\n", OBSERVE)
    assert [(u.kind, u.names, u.words) for u in units] == [
        ("observation", ["grep"], ["|", "a.txt"]), ("action", ["echo"], ["a;b", "c.txt"]),
    ]  # fmt: skip
    heredoc = "cat > fix.py <<'EOF'\nimport os; rm -rf /\nprint('x | y')\nEOF\npython3 fix.py\n"
    assert kinds(heredoc) == [("action", ["cat"]), ("action", ["python3"])]  # the body is data
    tabbed = "cat <<-END > out.txt\n\tls\n\tEND\nls\n"
    assert kinds(tabbed) == [("action", ["cat"]), ("observation", ["ls"])]
    assert kinds("cat <<< 'just text'\n") == [("observation", ["cat"])]  # a here-string is not a here-doc
    assert kinds("ls  # and then; rm -rf x\n") == [("observation", ["ls"])]
    assert kinds('echo "#not a comment" > o.txt\n') == [("action", ["echo"])]
    multi = 'python3 -c "import json\nprint(1)"\nls\n'  # a newline inside quotes does not end the command
    assert kinds(multi) == [("action", ["python3"]), ("observation", ["ls"])]


def test_keystrokes_that_are_not_commands():
    assert kinds("C-c") == [("key", ["C-c"])] and kinds("Escape") == [("key", ["Escape"])]
    assert kinds("y\n") == [("input", [])] and kinds(":wq\n") == [("input", [])]
    assert kinds("mysecret\n", after_question=True) == [("input", [])]  # typed at "Password:"
    assert kinds("mysecret\n") == [("action", ["mysecret"])]


def test_an_unreadable_line_is_an_unparsed_action_never_an_error():
    units = parse_keystrokes("echo 'unterminated > x.txt\n", OBSERVE)
    assert [(u.kind, u.unparsed) for u in units] == [("action", True)]


@pytest.mark.parametrize(
    "line",
    ["tail -n +2 data.csv | wc -l > count.txt", "a&&b;c||d", "make -j4 >/dev/null 2>&1 &",
     "cmd 2>>err.log <in.txt", "x=1 y=2 ./run.sh --port=8080", "(cd sub && ls) | sort"],
)  # fmt: skip
def test_the_fast_path_splits_exactly_like_shlex(line):
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    assert tokens(line) == list(lexer)


# ---------------------------------------------------------------------------------------------
# TOR, counted by hand


def test_inspect_then_act_is_targeted_and_acting_blind_is_not():
    careful = traj(
        step("ls\n"), screen(PROMPT + "ls", "data.csv  notes.txt"),
        step("tail -n +2 data.csv | wc -l > count.txt\n"), screen(PROMPT + "tail -n +2 data.csv | wc -l > count.txt"),
        step("cat count.txt\n"), screen(PROMPT + "cat count.txt", "3"),
        step(done=True),
    )  # fmt: skip
    row = tor(careful)  # 1 action (the pipeline writes count.txt), data.csv was on the screen of `ls`
    assert (row["n_observations"], row["n_actions"], row["n_targeted"], row["tor"]) == (2, 1, 1, 1.0)
    blind = traj(
        step("tail -n +2 data.csv | wc -l > count.txt\n"), screen(PROMPT + "tail -n +2 data.csv | wc -l > count.txt"),
        step("cat count.txt\n"), screen(PROMPT + "cat count.txt", "3"), step(done=True),
    )  # fmt: skip
    row = tor(blind)  # the task statement named data.csv, but no screen had shown it
    assert (row["n_actions"], row["n_targeted"], row["tor"]) == (1, 0, 0.0)


def test_chains_quoted_arguments_and_ports():
    conv = traj(
        step("ls -la /app\n"), screen("-rw-r--r-- 1 root root 120 Nov  1 10:00 config.ini", "server listening on 0.0.0.0:8080"),
        # mkdir backup: untargeted; cp config.ini backup/: targeted; grep | tee n.txt: an action, targeted
        step("mkdir -p backup && cp config.ini backup/ ; grep -c port config.ini | tee n.txt\n"),
        screen("1"),
        # a quoted argument: 8080 was on the screen (a port); sed on "my settings.conf": never seen
        step('echo "proxy_pass http://localhost:8080" >> site.conf\n', "sed -i 's/a/b/' \"my settings.conf\"\n"),
        screen(""),
        step(done=True),
    )  # fmt: skip
    row = tor(conv)
    assert (row["n_observations"], row["n_actions"], row["n_targeted"]) == (1, 5, 3)
    assert row["tor"] == pytest.approx(3 / 5)


def test_heredoc_bodies_and_echoed_commands_are_not_observations():
    conv = traj(
        step("cat > fix.py <<'EOF'\nprint(open('data.csv').read())\nEOF\n", "python3 fix.py\n"),
        # the screen echoes what was typed (prompt and `> ` lines): none of it was observed
        screen(PROMPT + "cat > fix.py <<'EOF'", "> print(open('data.csv').read())", "> EOF",
               PROMPT + "python3 fix.py", "a,b", "1,2"),
        step("rm fix.py\n"),  # fix.py appeared only in echoed input
        screen(PROMPT + "rm fix.py"),
        step(done=True),
    )  # fmt: skip
    row = tor(conv)
    assert (row["n_actions"], row["n_targeted"], row["tor"]) == (3, 0, 0.0)


def test_keys_answers_parse_errors_and_unparsed_lines():
    conv = traj(
        step("apt-get install -y jq\n"), screen("Do you want to continue? [Y/n] "),
        step("Y\n", "C-c"),  # an answer and a key: no command
        screen("Abort.", PROMPT),
        {"role": "assistant", "content": "not json at all"},  # the harness ran nothing
        {"role": "user", "content": "Your answer could not be used: jq_config.json is not JSON"},
        step("vim jq_config.json\n", "echo 'unterminated > out.txt\n"),  # untargeted, and an unparsed line
        screen(""), step(done=True),
    )  # fmt: skip
    row = tor(conv)
    assert (row["n_actions"], row["n_targeted"], row["n_keys"], row["n_unparsed"]) == (3, 0, 2, 1)
    assert (row["n_unparseable"], row["n_steps"], row["tor"]) == (1, 5, 0.0)


def test_a_trajectory_without_an_action_has_no_tor():
    row = tor(traj(step("ls\n"), screen("a"), step(done=True)))
    assert row["n_actions"] == 0 and math.isnan(row["tor"])


# ---------------------------------------------------------------------------------------------
# the streaming pass


def test_quality_pass_writes_one_row_per_trajectory_and_the_statistics(tiny_corpus, tmp_path):
    out, stats_path = tmp_path / "quality.parquet", tmp_path / "statistics.json"
    summary = write_quality(
        tiny_corpus / "traj.parquet", tiny_corpus / "stats.json", out, stats_path, batch_rows=1
    )
    rows = pq.read_table(out).to_pylist()
    traj_ids = pq.read_table(tiny_corpus / "traj.parquet", columns=["traj_id"]).column("traj_id").to_pylist()
    assert [r["traj_id"] for r in rows] == traj_ids
    assert json.loads(stats_path.read_text()) == json.loads(json.dumps(summary))
    cmds = summary["commands"]
    assert cmds["total"] == sum(k for _, k, _ in cmds["top"])  # the fixture has fewer than 20 programs
    assert cmds["actions"] == sum(r["n_actions"] for r in rows)
    assert summary["completion"] == {"rows": 3, "completed": 2, "duplicates": 0,
                                     "quarantined": {"not_completed": 1}, "rate": 2 / 3}  # fmt: skip
    tors = sorted(r["tor"] for r in rows)
    assert summary["tor"]["mean"] == pytest.approx(sum(tors) / 2) and sum(summary["tor"]["histogram"]) == 2
    assert sum(summary["steps"]["histogram"].values()) == summary["trajectories"] == 2
