"""The app across a session (issue 26): a field's error that goes when its text is a value again, boxes
that look unchecked when they are, a Benchmark screen that draws nothing while idle, keys typed in a burst,
and the last plan remembered between runs (the user config directory), with flags that win over it.

Driven through Textual's Pilot on the same fixed database as tests/test_app.py.
"""

from __future__ import annotations

import asyncio

from textual.widgets import Input

from test_app import SIZE, db, make_app, ranked, text  # noqa: F401 - db is a fixture


def test_a_valid_value_clears_the_error_and_brings_the_verdict_back(db):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            assert "Buy" in text(app, "#verdict")
            for key, good in (("budget", "50000"), ("prices", "")):
                box = app.screen.query_one(f"#{key}", Input)
                await pilot.press("e", *(["tab"] * 4 if key == "prices" else []), "end", "x")
                await pilot.pause(0.2)
                assert box.has_class("-bad") and "x'" in text(app, "#verdict"), text(app, "#verdict")
                await pilot.press("backspace")
                await pilot.pause(0.3)
                assert box.value == good
                assert not box.has_class("-bad")
                shown = text(app, "#verdict")
                assert "not an amount" not in shown and "ID=USD" not in shown and "Buy" in shown, shown
                await pilot.press("escape")

    asyncio.run(go())


def _box(line: str) -> str:
    """What is inside a check box drawn as Textual draws it (▐X▌)."""
    return line[line.index("▐") + 1:line.index("▌")]


def test_unchecked_boxes_look_unchecked(db):
    from tui_planner.app.screens.common import Check, Checks

    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            gpus = app.screen.query_one("#gpus", Checks)
            assert _box(gpus.render_line(0).text) == "X"
            await pilot.press("g", "space")  # the first GPU type off
            await pilot.pause(0.2)
            assert _box(gpus.render_line(0).text) == " " and _box(gpus.render_line(1).text) == "X"
            await pilot.press("space")
            await pilot.pause(0.2)
            assert _box(gpus.render_line(0).text) == "X"
            await pilot.press("3")
            await pilot.pause(0.2)
            compile_, retry = app.screen.query_one("#b-compile", Check), app.screen.query_one("#b-retry", Check)
            assert compile_.value and _box(str(compile_.render())) == "X"
            assert not retry.value and _box(str(retry.render())) == " "
            retry.toggle()
            await pilot.pause(0.1)
            assert _box(str(retry.render())) == "X"

    asyncio.run(go())


def test_the_benchmark_screen_draws_nothing_while_idle(db):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            await pilot.press("3")
            screen = app.screen
            for _ in range(400):
                await pilot.pause(0.05)
                if screen.machine is not None:
                    break
            await pilot.pause(0.5)
            frames = []
            display = app._display
            app._display = lambda s, renderable: (frames.append(renderable) if renderable is not None else None,
                                                   display(s, renderable))[1]
            await pilot.pause(1.5)  # nothing runs: nothing may change on screen
            app._display = display
            assert not frames, f"{len(frames)} updates drawn while idle"

    asyncio.run(go())


def burst(app, keys) -> None:
    """Keys as a fast typist's reach the app: all queued at once, none waiting for the one before to be
    handled (Pilot.press waits after each key)."""
    from textual import events

    for key in keys:
        char = key if len(key) == 1 else None
        event = events.Key(key, char)
        event.set_sender(app)
        app._driver.send_message(event)


async def settled(pilot, app) -> None:
    for _ in range(100):
        await pilot.pause(0.05)
        if app.ranking is not None and app.ranking.state == app.state:
            return


def test_keys_typed_in_a_burst_all_land(db):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            burst(app, ["e", *"120k", "tab", *"60", "tab", *"4", "escape"])
            await settled(pilot, app)
            await pilot.press("right_square_bracket")  # a what-if key after: on the plan as typed
            await settled(pilot, app)
            values = {k: app.screen.query_one(f"#{k}", Input).value for k in ("budget", "deadline", "lifespan")}
            assert values == {"budget": "130000", "deadline": "60", "lifespan": "4"}, values
            assert (app.state.budget_usd, app.state.deadline_days, app.state.lifespan_years) == (130_000, 60, 4)
            assert app.screen.query_one("#ranking").has_focus

    asyncio.run(go())
