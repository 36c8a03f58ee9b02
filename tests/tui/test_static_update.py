"""A Static updated in place still grows and shrinks with its text, and lays out only when its height changes."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.geometry import Region
from textual.widgets import Static

from linkscope.tui.widgets.static_update import WrappedText, update_if_changed, update_in_place
from support.tui import async_test, counted_layouts

WIDTH = 20


class OneStatic(App[None]):
    """A Static with padding, height auto, in a scroll: as the finding's detail sits on the Ranks tab."""

    CSS = "#detail { height: auto; padding: 0 1; }"

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield WrappedText(id="detail")


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


@async_test
async def test_a_text_shown_already_is_not_repainted() -> None:
    """The Ranks status and suggestion lines (and the finding's detail) are left as they are when a keystroke gives
    them the text they show (the same characters, style and spans); another style is another text."""
    app = OneStatic()
    async with app.run_test(size=(WIDTH + 2, 10)) as pilot:
        detail = app.query_one("#detail", Static)
        update_if_changed(detail, Text("one line", style="bold"))
        await pilot.pause()
        repaints: list[None] = []
        refresh = detail.refresh

        def counted(*regions: Region, **options: bool) -> Static:
            repaints.append(None)
            return refresh(*regions, **options)

        detail.refresh = counted  # type: ignore[method-assign]
        update_if_changed(detail, Text("one line", style="bold"))
        update_in_place(detail, Text("one line", style="bold"))
        assert not repaints
        update_if_changed(detail, Text("one line"))
        shown = detail.content
        assert repaints and isinstance(shown, Text) and shown.plain == "one line" and not shown.style


class OneWrappedText(App[None]):
    """The finding's detail as the Ranks tab has it: wrapped text, height auto, padding, in a scroll."""

    CSS = "#detail { height: auto; padding: 0 1; }"

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield WrappedText(id="detail")


@async_test
async def test_a_new_height_of_wrapped_text_lays_the_screen_out_once() -> None:
    """Textual lays out again after a layout that resized a widget; wrapped text grows or shrinks with one."""
    app = OneWrappedText()
    async with app.run_test(size=(WIDTH + 2, 10)) as pilot:
        detail = app.query_one("#detail", WrappedText)
        update_in_place(detail, Text("one line"))
        await pilot.pause()
        for text, height in (("a text that wraps onto more than one line at this width", 3), ("short again", 1)):
            with counted_layouts() as layouts:
                update_in_place(detail, Text(text))
                for _ in range(4):
                    await pilot.pause()
            assert len(layouts) == 1
            assert detail.content_size.height == height and detail.virtual_size.height == height
            assert detail.region.height == height and text.split()[0] in str(detail.render())
