"""A grid's row line is one Strip built at once when nothing needs cutting, with the segments the general way (cut
the cells to the view, join the label, cut to the width) gives; any other row goes the general way."""

from __future__ import annotations

from typing import Any

import pytest
from rich.segment import Segment
from rich.style import Style
from textual.app import App, ComposeResult
from textual.strip import Strip

from linkscope.tui.widgets.cell_grid import CellGrid
from support.tui import async_test

CELL_WIDTH = 6
LABEL_WIDTH = 10
BASE = Style(bgcolor="black")
LABEL = Style(bold=True)


def cells(*texts: str) -> list[Segment]:
    """Cells as CellGrid makes them: centred in the cell width less one, then a space."""
    return [Segment(f"{text:^{CELL_WIDTH - 1}} "[:CELL_WIDTH], Style(color="red")) for text in texts]


@pytest.mark.parametrize(
    ("label", "row", "offset", "cells_width", "width"),
    [
        (" node0    ", cells("0", "1"), 0, 20, 30),  # in view with room to spare: built at once
        (" node0    ", cells("0", "1", "2"), 0, 18, 28),  # exactly the view
        (" node0    ", cells("0", "1", "2", "3"), 0, 20, 30),  # wider than the view: cut
        (" node0    ", cells("0", "1"), 2, 20, 30),  # scrolled sideways
        (" node0    ", cells("✓", "1"), 0, 20, 30),  # a character that may be wider than a column
        (" gpu-node-a-very-long", cells("0"), 0, 20, 30),  # a label longer than its column
        (" nöde0    ", cells("0"), 0, 20, 30),
        (" node0    ", cells("0"), 0, 0, 8),  # narrower than the labels
        (" node0    ", [], 0, 20, 30),
    ],
)
def test_a_row_line_has_the_segments_of_the_general_way(label: str, row: list[Segment], offset: int,
                                                          cells_width: int, width: int) -> None:
    grid = CellGrid()
    grid._cell_width, grid._label_width = CELL_WIDTH, LABEL_WIDTH
    line = grid._row_strip(Segment(label, LABEL), row, offset, cells_width, BASE, width)
    general = CellGrid._cut_row(Segment(label, LABEL), row, offset, cells_width, BASE, width)
    assert list(line) == list(general) and line.cell_length == general.cell_length


class Grid(App[None]):
    def compose(self) -> ComposeResult:
        yield CellGrid()

    def on_mount(self) -> None:
        self.query_one(CellGrid).set_shape([f"node{row}" for row in range(50)], ["0", "1", "2"], 4)


@async_test
async def test_a_row_in_view_is_one_strip() -> None:
    """A screenful of a 1,024-node rank map is redrawn on every keystroke in the Ranks form: each row line
    was four Strips (the cells, padded, the label, joined), each with its seven caches."""
    app = Grid()
    async with app.run_test(size=(40, 10)) as pilot:
        await pilot.pause()
        grid = app.query_one(CellGrid)
        made: list[None] = []
        init = Strip.__init__

        def counted(strip: Strip, *args: Any, **kwargs: Any) -> None:
            made.append(None)
            init(strip, *args, **kwargs)

        Strip.__init__ = counted  # type: ignore[method-assign,assignment]
        try:
            line = grid.render_line(1)
        finally:
            Strip.__init__ = init  # type: ignore[method-assign]
        assert len(made) == 1 and line.text.startswith(" node0") and line.cell_length == grid.size.width
