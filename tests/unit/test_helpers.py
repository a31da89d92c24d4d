"""The tests' own rule for terminal captures that two runs may show differently (tests/helpers.py)."""

from tests.helpers import interleaved

PROMPT = "root@box:/app# "
TWO = PROMPT + "te x | wc -l > out/r.txt\n{}\n" + PROMPT.rstrip() + "\n\n\n"


def test_two_processes_diagnostics_in_the_other_order_are_interleaved():
    a = TWO.format("bash: te: command not found\nbash: out/r.txt: No such file or directory")
    b = TWO.format("bash: out/r.txt: No such file or directory\nbash: te: command not found")
    assert interleaved(a, b) and interleaved(b, a)
    wc = "wc: invalid option -- 'p'\nTry 'wc --help' for more information."
    tail = "tail: invalid number of lines: '+'"
    assert interleaved(TWO.format(f"{wc}\n{tail}"), TWO.format(f"{tail}\n{wc}"))
    assert interleaved(
        TWO.format(f"{wc}\n{tail}"),
        TWO.format(f"wc: invalid option -- 'p'\n{tail}\nTry 'wc --help' for more information."),
    )

    # a diagnostic written in pieces, the other process's lines landing inside it (seen in test_crash)
    assert interleaved(TWO.format(f"{tail}\n{wc}"), TWO.format(f"tail: {wc}\ninvalid number of lines: '+'"))
    # the same with the pieces in the first capture (seen in test_crash, 2026-12-02: the resumed run's)
    pieces = TWO.format(
        "tail: wc: invalid option -- 'p'\ninvalid number of lines: '+'\nTry 'wc --help' for more information."
    )
    assert interleaved(pieces, TWO.format(f"{wc}\n{tail}")) and interleaved(
        TWO.format(f"{wc}\n{tail}"), pieces
    )


def test_what_a_resume_bug_would_show_is_not():
    same = TWO.format("bash: te: command not found")
    assert not interleaved(same, same)  # equal: nothing to explain
    assert not interleaved(TWO.format("12"), TWO.format("21"))  # wc -l printing another number
    assert not interleaved(TWO.format("3 passed, 1 failed"), TWO.format("1 passed, 3 failed"))
    assert not interleaved(TWO.format("alice\nBob\ncarol"), TWO.format("Bob\nalice\ncarol"))  # sort's locale
    assert not interleaved(TWO.format("b: 1\na: 2"), TWO.format("b: 1\na: 3"))  # a changed line
    # the same characters mixed finely (not a few writes), or one process's own text reordered
    a, b = "tail: abcdef", "wc: uvwxyz"
    fine = a[:6] + "".join(x + y for x, y in zip(a[6:], b[:6], strict=True)) + "\n" + b[6:]
    assert interleaved(TWO.format(f"{a}\n{b}"), TWO.format(f"tail: {b}\nabcdef"))  # the control: few writes
    assert not interleaved(TWO.format(f"{a}\n{b}"), TWO.format(fine))
    assert not interleaved(TWO.format("tail: one two\nwc: x"), TWO.format("tail: two one\nwc: x"))
    cut = PROMPT + "cat calc.py\n"
    assert not interleaved(cut + "cat: calc.py: No such file or directory\n" + PROMPT, cut)  # captured early
