"""Scrollbars of a ScrollView drawn again by a layout of the screen only when what they show has changed.

Textual's ScrollView updates and repaints its scrollbars at every layout of the screen: the layout hands it the
virtual size of its region, which a ScrollView never has (it keeps its own), so each layout looks like a new size.
On the Ranks tab a finding's detail that grows by a line, or a switch to the tab, lays the screen out; each time
the rank map's and the findings table's scrollbars were drawn again (1-3 ms each), and the repaint they asked for
made one more frame after the layout's own.
"""

from __future__ import annotations

from textual.geometry import Size
from textual.scroll_view import ScrollView

ScrollbarState = tuple[object, ...]
"""What a ScrollView's scrollbars are drawn from: its size, virtual size, offset and scrollbar styles."""


class SteadyScrollbars(ScrollView):
    """A ScrollView whose scrollbars a layout leaves as they are unless their state changed since their last update.

    Overrides two private hooks of Textual's ScrollView (`_size_updated`, called by a layout with the widget's
    new size, and `_scroll_update`, which updates and repaints the scrollbars): Textual has no public hook for
    either. tests/tui/test_steady_scrollbars.py fails if a layout repaints the scrollbars again, or if a new size
    no longer reaches them. Put it after a ScrollView subclass (DataTable) in a widget's bases: Textual takes a
    widget's CSS from its first bases only."""

    _scrollbars_drawn_for: ScrollbarState | None = None

    def _scrollbar_state(self) -> ScrollbarState:
        styles = self.styles
        return (self._size, self.virtual_size, self.scroll_offset, self.show_vertical_scrollbar,
                self.show_horizontal_scrollbar, styles.overflow_x, styles.overflow_y, styles.scrollbar_size_vertical,
                styles.scrollbar_size_horizontal)

    def _scroll_update(self, virtual_size: Size) -> None:
        super()._scroll_update(virtual_size)
        self._scrollbars_drawn_for = self._scrollbar_state()

    def _size_updated(self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True) -> bool:
        if size == self._size and self._scrollbars_drawn_for == self._scrollbar_state():
            return self._container_size != container_size  # what ScrollView answers for an unchanged size
        return super()._size_updated(size, virtual_size, container_size, layout)
