"""A Static updated in place still grows and shrinks with its text, and lays out only when its height changes."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from linkscope.tui.widgets.static_update import update_in_place
from support.tui import async_test, counted_layouts

WIDTH = 20


class OneStatic(App[None]):
    """A Static with padding, height auto, in a scroll: as the finding's detail sits on the Ranks tab."""

    CSS = "#detail { height: auto; padding: 0 1; }"

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(id="detail")


@async_test
async def test_same_height_repaints_without_a_layout_and_a_new_height_lays_out() -> None:
    app = OneStatic()
    async with app.run_test(size=(WIDTH + 2, 10)) as pilot:
        detail = app.query_one("#detail", Static)
        update_in_place(detail, Text("one line"))
        await pilot.pause()
        assert detail.content_size.height == 1
        with counted_layouts() as layouts:
            update_in_place(detail, Text("another line"))
            await pilot.pause()
            assert not layouts
            assert "another line" in str(detail.render())
            update_in_place(detail, Text("a text that wraps onto more than one line at this width"))  # 55 characters
            await pilot.pause()
            assert layouts
            assert detail.content_size.height == 3
            update_in_place(detail, Text("short again"))
            await pilot.pause()
            assert detail.content_size.height == 1
