"""The Ranks tab's findings table: new findings in as many rows are written into the rows on show (no rebuild, and
no layout of the screen unless the columns' width changes); another number of rows rebuilds the table."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from rich.padding import Padding
from rich.style import Style
from textual.geometry import Region
from textual.pilot import Pilot
from textual.renderables.styled import Styled

from linkscope.topo.checks.report import LayoutFinding
from linkscope.topo.samples import load_sample
from linkscope.tui.app import build_app
from linkscope.tui.widgets.findings_table import COLUMNS, FindingsTable
from support.tui import FakeServices, async_test, counted_layouts, settle

SIZE = (120, 40)


def findings_of_dgx1_tp2() -> tuple[LayoutFinding, ...]:
    """tp=2 on the DGX-1 (V100) sample: several findings."""
    from linkscope.topo.checks.check import check_layout
    from linkscope.topo.checks.request import CheckRequest

    findings = check_layout(load_sample("dgx1-v100"), CheckRequest(sizes=(("tp", 2),))).findings
    assert len(findings) > 1
    return findings


@asynccontextmanager
async def ranks_findings_table() -> AsyncIterator[tuple[FindingsTable, Pilot[None]]]:
    """The Ranks tab's findings table, the DGX-1 (V100) sample on show at :data:`SIZE`, the app settled."""
    app = build_app(snapshot=load_sample("dgx1-v100"), services=FakeServices(), initial_tab="ranks")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot.app)
        yield app.query_one(FindingsTable), pilot


def shown_table(table: FindingsTable) -> list[list[tuple[str, Style | None]]]:
    """What the screen shows where the table is (its scrollbars included): each line's text and styles."""
    region = table.region
    strips = table.screen._compositor.render_strips()[region.y : region.bottom]
    return [[(segment.text, segment.style) for segment in strip.crop(region.x, region.right)] for strip in strips]


async def assert_shows_as_rebuilt(table: FindingsTable, findings: tuple[LayoutFinding, ...], pilot: Pilot[None]) -> None:
    """The table, which shows `findings` written in place, looks as a table rebuilt with them does."""
    written = shown_table(table)
    table.show((), checked=False)  # another number of rows: the table is built afresh
    table.show(findings)
    await settle(pilot.app)
    assert shown_table(table) == written


def shown_rows(table: FindingsTable) -> list[list[str]]:
    """The plain text of every cell, row by row."""
    return [[str(cell) for cell in table.get_row_at(row)] for row in range(table.row_count)]


@async_test
async def test_as_many_new_findings_update_the_rows_in_place_and_show() -> None:
    findings = findings_of_dgx1_tp2()
    longer = tuple(dataclasses.replace(finding, message="again: " + finding.message) for finding in findings)
    async with ranks_findings_table() as (table, pilot):
        table.show(findings)
        await pilot.pause()
        keys = list(table.rows)
        table.move_cursor(row=1)
        table.show(longer)
        await pilot.pause()
        assert list(table.rows) == keys  # the same rows, written into
        assert [row[3] for row in shown_rows(table)] == [finding.message for finding in longer]
        widths = [column.width for column in table.columns.values()]
        assert widths[3] == max(len(finding.message) for finding in longer)
        assert table.virtual_size.width == sum(width + 2 * table.cell_padding for width in widths)
        assert table.cursor_row == 0 and table.scroll_offset.y == 0
        assert any("again:" in strip.text for strip in (table.render_line(y) for y in range(table.size.height)))


@async_test
async def test_new_findings_of_the_same_widths_repaint_without_a_layout() -> None:
    findings = findings_of_dgx1_tp2()
    swapped = tuple(dataclasses.replace(finding, message=finding.message.swapcase()) for finding in findings)
    async with ranks_findings_table() as (table, pilot):
        table.show(findings)
        await settle(pilot.app)
        with counted_layouts() as layouts:
            table.show(swapped)
            await pilot.pause()
            await pilot.pause()
            assert not layouts
        assert [row[3] for row in shown_rows(table)] == [finding.message for finding in swapped]


@async_test
async def test_new_findings_of_other_widths_show_as_a_rebuilt_table_would_without_a_layout() -> None:
    """Longer messages widen the message column and the table: the horizontal scrollbar's thumb follows without a
    layout of the screen (each tp 4 <-> 8 edit of a 1,024-host cluster with odd nodes changes the width), and the
    screen is the one a table built afresh with these findings shows."""
    findings = findings_of_dgx1_tp2()
    longer = tuple(dataclasses.replace(finding, message=finding.message + " (seen again)") for finding in findings)
    async with ranks_findings_table() as (table, pilot):
        table.show(findings)
        await settle(pilot.app)
        assert table.show_horizontal_scrollbar
        with counted_layouts() as layouts:
            table.show(longer)
            await pilot.pause()
            await pilot.pause()
            assert not layouts
        assert table.horizontal_scrollbar.window_virtual_size == table.virtual_size.width
        await assert_shows_as_rebuilt(table, longer, pilot)


@async_test
async def test_new_messages_render_the_message_cells_alone_and_show_as_a_rebuilt_table_would() -> None:
    """Each tp 4 <-> 8 edit of a 1,024-host cluster with odd nodes changes the messages alone: the next frame
    renders those cells and no other (DataTable's update count dropped every cell's render, so the severities,
    codes, dimensions and labels rendered again), and shows what a table built afresh with them shows (a render
    kept where its cell changed would show the old message)."""
    findings = findings_of_dgx1_tp2()
    swapped = tuple(dataclasses.replace(finding, message=finding.message.swapcase()) for finding in findings)
    async with ranks_findings_table() as (table, pilot):
        table.show(findings)
        await settle(pilot.app)
        table.show(swapped)  # after the table's resize (which drops every render)
        await settle(pilot.app)
        rendered: list[str] = []
        console = table.app.console
        render_lines = console.render_lines

        def counted(renderable: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(renderable, Styled) and isinstance(renderable.renderable, Padding):
                rendered.append(str(renderable.renderable.renderable))
            return render_lines(renderable, *args, **kwargs)

        console.render_lines = counted  # type: ignore[method-assign]
        table.show(findings)
        await pilot.pause()
        await pilot.pause()
        console.render_lines = render_lines  # type: ignore[method-assign]
        assert rendered and set(rendered) <= {finding.message for finding in findings}
        written = shown_table(table)
        assert any(finding.message[:20] in "".join(text for text, _ in line) for line in written for finding in findings)
        await assert_shows_as_rebuilt(table, findings, pilot)


@async_test
async def test_new_findings_are_written_with_one_repaint() -> None:
    """All the changed cells are written before the table repaints once (`update_cell` repainted it per cell)."""
    findings = findings_of_dgx1_tp2()
    swapped = tuple(dataclasses.replace(finding, message=finding.message.swapcase()) for finding in findings)
    async with ranks_findings_table() as (table, pilot):
        table.show(findings)
        await settle(pilot.app)
        repaints: list[None] = []
        refresh = table.refresh

        def counted(*regions: Region, **options: bool) -> FindingsTable:
            if not regions:
                repaints.append(None)
            return refresh(*regions, **options)

        table.refresh = counted  # type: ignore[method-assign]
        table.show(swapped)
        assert len(repaints) == 1
        assert [row[3] for row in shown_rows(table)] == [finding.message for finding in swapped]


@async_test
async def test_another_number_of_findings_rebuilds_the_table() -> None:
    findings = findings_of_dgx1_tp2()
    async with ranks_findings_table() as (table, pilot):
        table.show(findings)
        keys = list(table.rows)
        table.show(findings[1:])
        await pilot.pause()
        assert len(table.rows) == len(findings) - 1 and not set(table.rows) & set(keys)
        assert [row[1] for row in shown_rows(table)] == [finding.code for finding in findings[1:]]
        table.show((), checked=False)
        assert not table.rows and [str(column.label) for column in table.columns.values()] == list(COLUMNS)


@async_test
async def test_the_findings_columns_fit_their_rows_at_once() -> None:
    """A finding list's columns have their widths the moment it is filled, not when the table next idles (under
    load the Ranks picture caught them at the width of their labels), and they fit the rows on show alone."""
    findings = findings_of_dgx1_tp2()
    async with ranks_findings_table() as (table, _):
        table.show(findings)
        widths = [column.width for column in table.columns.values()]
        assert widths[1] == max(len(finding.code) for finding in findings)
        table.show(findings[:1])
        assert [column.width for column in table.columns.values()][3] == len(findings[0].message)
        assert widths[3] >= len(findings[0].message)


@async_test
async def test_the_same_findings_keep_their_rows_and_the_cursor_goes_home() -> None:
    """A check that finds what the one before found leaves the rows as they are (no rebuild and repaint of the
    table on a keystroke), with the cursor back on the first row, where a new list puts it."""
    findings = findings_of_dgx1_tp2()
    async with ranks_findings_table() as (table, _):
        table.show(findings)
        keys = list(table.rows)
        table.move_cursor(row=1)
        table.show(tuple(findings))  # equal findings, another tuple
        assert list(table.rows) == keys and table.cursor_row == 0
        table.show(findings[:1])
        assert len(table.rows) == 1 and list(table.rows) != keys[:1]
        table.show(findings[:1], checked=False)
        assert not table.rows


@async_test
async def test_the_table_shown_again_at_its_size_keeps_its_renders() -> None:
    """A switch back to the Ranks tab resizes the table to the size it had: DataTable dropped every render then,
    and the whole table rendered again in the switch's frame. A new size still goes to DataTable's handler."""
    findings = findings_of_dgx1_tp2()
    async with ranks_findings_table() as (table, pilot):
        table.show(findings)
        await settle(pilot.app)
        shown, renders = shown_table(table), table._update_count
        for tab_id in ("links", "ranks"):
            pilot.app.action_show_tab(tab_id)  # type: ignore[attr-defined]
            await settle(pilot.app)
        assert table._update_count == renders and shown_table(table) == shown
        await pilot.resize_terminal(SIZE[0] - 10, SIZE[1])
        await settle(pilot.app)
        assert table._update_count > renders
