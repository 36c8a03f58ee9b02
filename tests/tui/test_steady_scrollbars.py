"""A layout of the screen leaves a grid's scrollbars as they are unless the grid's size changed; a new size (or a
new virtual size) still reaches them."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Region, Size
from textual.scrollbar import ScrollBar
from textual.widgets import Static

from linkscope.tui.widgets.cell_grid import CellGrid
from support.tui import async_test, counted_layouts

ROWS = 100


class Grid(App[None]):
    """A grid taller than the screen (a vertical scrollbar) under a line of text whose height may change."""

    CSS = "#note { height: auto; } CellGrid { height: 1fr; }"

    def compose(self) -> ComposeResult:
        yield Static("one line", id="note")
        yield CellGrid()

    def on_mount(self) -> None:
        self.query_one(CellGrid).set_shape([f"node{row}" for row in range(ROWS)], ["0", "1"], 4)


def counted_repaints(scrollbar: ScrollBar) -> list[None]:
    """One entry per repaint `scrollbar` asks for from now on."""
    repaints: list[None] = []
    refresh = scrollbar.refresh

    def counted(*regions: Region, **options: bool) -> ScrollBar:
        repaints.append(None)
        return refresh(*regions, **options)

    scrollbar.refresh = counted  # type: ignore[method-assign]
    return repaints


@async_test
async def test_a_layout_that_leaves_the_grid_as_it_was_leaves_its_scrollbar() -> None:
    app = Grid()
    async with app.run_test(size=(40, 12)) as pilot:
        await pilot.pause()
        grid = app.query_one(CellGrid)
        assert grid.show_vertical_scrollbar
        repaints = counted_repaints(grid.vertical_scrollbar)
        with counted_layouts() as layouts:
            app.query_one("#note", Static).update(Text("another line"))  # a layout of the screen; the grid keeps its size
            await pilot.pause()
            await pilot.pause()
        assert layouts and not repaints


@async_test
async def test_a_new_size_reaches_the_scrollbar() -> None:
    app = Grid()
    async with app.run_test(size=(40, 12)) as pilot:
        await pilot.pause()
        grid = app.query_one(CellGrid)
        repaints = counted_repaints(grid.vertical_scrollbar)
        app.query_one("#note", Static).update(Text("three\nlines\nnow"))  # the grid two lines shorter
        await pilot.pause()
        await pilot.pause()
        assert repaints and grid.vertical_scrollbar.window_size == grid.size.height == 12 - 3
        await pilot.resize_terminal(40, 20)
        await pilot.pause()
        await pilot.pause()
        assert grid.vertical_scrollbar.window_size == grid.size.height == 20 - 3
        grid.set_shape([f"node{row}" for row in range(ROWS * 2)], ["0", "1"], 4)
        await pilot.pause()
        await pilot.pause()
        assert grid.virtual_size == Size(grid.virtual_size.width, ROWS * 2 + 1)
        assert grid.vertical_scrollbar.window_virtual_size == ROWS * 2 + 1
