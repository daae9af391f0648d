"""The app across a session (issue 26): a field's error that goes when its text is a value again, boxes
that look unchecked when they are, a Benchmark screen that draws nothing while idle, keys typed in a burst,
and the last plan remembered between runs (the user config directory), with flags that win over it.

Driven through Textual's Pilot on the same fixed database as tests/test_app.py.
"""

from __future__ import annotations

import asyncio

from textual.widgets import Input

from test_app import SIZE, benchmark_screen, db, make_app, ranked, text  # noqa: F401 - db is a fixture


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
                assert box.has_class("-bad") and "x'" in text(app, "#field-note"), text(app, "#field-note")
                await pilot.press("backspace")
                await pilot.pause(0.3)
                assert box.value == good
                assert not box.has_class("-bad") and not app.screen.query_one("#field-note").display
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
            await pilot.press("4")
            await pilot.pause(0.2)
            fits = app.screen.query_one("#f-feasible", Check)
            assert not fits.value and _box(str(fits.render())) == " "
            fits.toggle()
            await pilot.pause(0.1)
            assert _box(str(fits.render())) == "X"

    asyncio.run(go())


def test_the_benchmark_screen_draws_nothing_while_idle(db):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            screen = await benchmark_screen(pilot, app)
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


# --- the last plan, kept between runs ----------------------------------------------------------------


def test_the_saved_plan_reads_back_and_a_bad_file_is_ignored_with_a_note(tmp_path, monkeypatch):
    import json

    from engine.data.presets import load_presets
    from engine.data.runs import RunFlags
    from tui_planner.app import saved
    from tui_planner.app import state as st

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    presets = load_presets(include_user=False)
    assert saved.path() == tmp_path / "tui-planner" / "last-plan.json"
    assert saved.load(presets) == ({}, None)  # no file: no note
    plan = st.PlanState(model="pythia-410m", budget_usd=80_000, deadline_days=None, lifespan_years=3,
                        kwh_price_usd=0.0, sources=("measured", "paper"), gpus_allowed=("a100", "h100"),
                        price_overrides=(("h100", 25_000.0),), run=RunFlags(tokens=100e9, seq_len=4096))
    saved.save(plan)
    assert [p.name for p in saved.path().parent.iterdir()] == ["last-plan.json"]  # no temporary file left
    fields, note = saved.load(presets)
    assert note is None and fields["model"] == "pythia-410m" and fields["run"] == plan.run
    assert saved.apply(st.PlanState(model="pythia-410m", run=plan.run), fields) == plan
    # a field that is not valid here is left out and named; the others apply
    data = json.loads(saved.path().read_text())
    data.update(gpus_allowed=["h100", "h900"], budget_usd=-5, model="nope")
    saved.path().write_text(json.dumps(data))
    fields, note = saved.load(presets)
    assert "gpus_allowed" not in fields and "budget_usd" not in fields and "model" not in fields
    assert fields["sources"] == ("measured", "paper") and fields["price_overrides"] == (("h100", 25_000.0),)
    assert "budget, gpus, model" in note
    for text in ("{not json", "[1, 2]", json.dumps({"kind": "something else"}), "\x00\xff"):
        saved.path().write_text(text)
        fields, note = saved.load(presets)
        assert fields == {} and "Ignored the saved plan" in note


def test_the_app_reopens_on_the_last_plan_flags_win_and_r_resets(db, tmp_path, monkeypatch):
    from tui_planner.app.screens.common import Checks

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))

    async def first():
        app = make_app(db, remember=True)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            await pilot.press("right_square_bracket", "f", "g", "space", "escape")
            await pilot.press("e", *["tab"] * 4, *"h100=25k", "enter")
            await ranked(pilot, app, budget_usd=60_000, price_overrides=(("h100", 25_000.0),))
            return app.state

    left = asyncio.run(first())
    assert (tmp_path / "tui-planner" / "last-plan.json").exists()
    from engine.data.presets import load_presets

    first_gpu = next(iter(load_presets(include_user=False).gpus))

    async def second():
        app = make_app(db, remember=True, deadline=30)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            s = app.state
            assert (s.budget_usd, s.sources, s.price_overrides, s.gpus_allowed) == (
                60_000, left.sources, left.price_overrides, left.gpus_allowed)
            assert s.deadline_days == 30  # the flag wins over the saved 100
            assert app.screen.query_one("#deadline", Input).value == "30"
            gpus = app.screen.query_one("#gpus", Checks)
            assert first_gpu not in gpus.selected and len(gpus.selected) == len(app.presets.gpus) - 1
            assert "h100" in gpus.render_line(0).text and "=$25k" in gpus.render_line(0).text  # the price used
            await pilot.press("R", "y")  # it asks first
            await ranked(pilot, app)
            s = app.state
            assert (s.budget_usd, s.deadline_days, s.price_overrides, s.gpus_allowed) == (50_000, 100, (), ())
            assert len(gpus.selected) == len(app.presets.gpus) and "$27.5k" in gpus.render_line(0).text
            assert app.screen.query_one("#prices", Input).value == ""

    asyncio.run(second())


def test_the_app_command_takes_budget_and_deadline_and_fresh_forgets(db, tmp_path, monkeypatch):
    from tui_planner import cli
    from tui_planner.app import saved
    from tui_planner.app import state as st
    from tui_planner.app.app import PlannerApp

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    saved.save(st.PlanState(model="pythia-410m", budget_usd=90_000, sources=("measured",)))
    opened = []
    monkeypatch.setattr(PlannerApp, "run", lambda self: opened.append(self))
    assert cli.main(["app", "--db", str(db), "--budget", "70000", "--deadline", "45"]) == 0
    s = opened[-1].initial
    assert (s.model, s.budget_usd, s.deadline_days, s.sources) == ("pythia-410m", 70_000, 45, ("measured",))
    assert cli.main(["app", "--db", str(db), "--fresh"]) == 0
    s = opened[-1].initial
    assert (s.model, s.budget_usd, s.sources) == ("pythia-1b", 50_000, ("measured", "predicted", "paper"))
    saved.path().write_text("{broken")
    assert cli.main(["app", "--db", str(db)]) == 0  # never a crash: the defaults, and a note
    assert opened[-1].initial.budget_usd == 50_000 and "Ignored the saved plan" in opened[-1].notes[0]
    for app in opened:
        app.store.close()
