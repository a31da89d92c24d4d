"""The scripted teacher's blind style acts without inspecting."""

from tests.helpers import REPO


def test_the_blind_teacher_acts_without_inspecting():
    from horizon.eval.collect.teacher import load_plan, script

    plan = load_plan(REPO / "demo" / "tasks" / "count-rows")
    for variant in range(4):
        careful, blind = script(plan, variant), script(plan, variant, "blind")
        inspected = {c for _, cmds, _ in careful for c in cmds if c in plan["inspect"]}
        assert inspected and not any(c in plan["inspect"] for _, cmds, _ in blind for c in cmds)
        assert [c for _, c, _ in blind if c] == [
            c for _, c, _ in careful if c and not set(c) <= set(plan["inspect"])
        ]
        assert blind[-2:] == careful[-2:]  # complete, then confirm
