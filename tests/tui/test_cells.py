"""Pure helpers behind the app: grid cells, rank map arrays, ring hops, the plot, export and forms."""

from __future__ import annotations

import dataclasses
import json

import pytest

from linkscope.topo.checks.check import check_layout
from linkscope.topo.checks.request import CheckRequest
from linkscope.topo.checks.suggest import Suggestion
from linkscope.topo.model.host import Link, LinkKind
from linkscope.topo.model.measurements import Measurements, PeerCopy, merge_measurements
from linkscope.topo.samples import load_sample
from linkscope.tui.layout_export import export_command, suggested_form, suggestion_text
from linkscope.tui.link_cells import gpu_cells, nic_cells
from linkscope.tui.rank_cells import group_index, rank_grid, rank_ranges, ring_overlay
from linkscope.tui.services import LayoutForm
from linkscope.tui.tabs.bench import collective_points, peer_copy_points
from linkscope.tui.widgets.bandwidth_plot import plot_lines
from support.tui import measured_copies, nvswitch_host


def test_gpu_cells_mark_degraded_pair_both_ways() -> None:
    """A copy at 120 of ~392 GB/s typical is degraded in both directions; others are not."""
    cells = gpu_cells(nvswitch_host(), measured_copies(degraded=(0, 3)))
    assert cells[0][3].degraded and cells[3][0].degraded
    assert not cells[0][1].degraded
    assert cells[0][3].text(show_expected=False) == "120 31%"
    assert cells[0][0].text(show_expected=False) == "X"


def test_gpu_cells_largest_size_wins_and_other_hosts_ignored() -> None:
    """Per pair the largest measured size is shown; copies recorded for another host are ignored."""
    copies = (
        PeerCopy(0, 1, size_bytes=1 << 20, unidir_gbps=50.0),
        PeerCopy(0, 1, size_bytes=1 << 28, unidir_gbps=380.0),
        PeerCopy(0, 2, size_bytes=1 << 28, unidir_gbps=10.0, host="other-box"),
    )
    cells = gpu_cells(nvswitch_host(), Measurements("test", peer_copies=copies))
    assert cells[0][1].measured_gbps == 380.0
    assert cells[0][2].measured_gbps is None
    assert cells[1][0].measured_gbps is None


def test_gpu_cells_ring_and_missing_link() -> None:
    """Ring hops are marked in both directions; a pair without a recorded link shows `?`."""
    host = nvswitch_host(gpus=3)
    host = dataclasses.replace(host, links=(Link(0, 1, LinkKind.PIX),))
    cells = gpu_cells(host, None, frozenset({(1, 0)}))
    assert cells[0][1].on_ring and cells[1][0].on_ring and not cells[1][2].on_ring
    assert cells[1][2].token == "?" and cells[1][2].colour_class == "unknown"
    assert cells[0][1].colour_class == "switch"


def test_nic_cells_follow_legend_tokens() -> None:
    """GPU x NIC cells carry the legend token and the NIC port's expected bandwidth (400 Gb/s -> 50 GB/s spec)."""
    host = nvswitch_host()
    cells = nic_cells(host)
    assert [cell.token for cell in cells[0]] == list(host.gpu_nic[0])
    assert cells[0][0].expected is not None and cells[0][0].expected.spec_gbps == 50.0


def test_nic_columns_put_the_active_fast_ports_first() -> None:
    """A down port and a slow management port go to the end of the GPU x NIC grid; each cell still
    names its NIC by its index in the host, so the detail describes the right one."""
    import dataclasses

    from linkscope.tui.link_cells import nic_order
    from linkscope.tui.widgets.link_detail import describe_gpu_nic

    host = nvswitch_host()
    nics = list(host.nics)
    nics[0] = dataclasses.replace(nics[0], state="DOWN")
    nics[1] = dataclasses.replace(nics[1], rate_gbit_per_s=1.0)
    host = dataclasses.replace(host, nics=tuple(nics))
    assert nic_order(host) == [2, 3, 1, 0]
    cells = nic_cells(host)
    assert [cell.col for cell in cells[0]] == [2, 3, 1, 0]
    assert [cell.token for cell in cells[0]] == [host.gpu_nic[0][b] for b in (2, 3, 1, 0)]
    assert "mlx5_2" in str(describe_gpu_nic(host, cells[0][0]))


def test_rank_grid_and_group_index() -> None:
    """Placement to a node-major grid, and each rank's group number."""
    placement = [(0, 1), (0, 0), (1, 1)]
    assert rank_grid(placement, nodes=2, gpus_per_node=2) == [1, 0, -1, 2]
    assert group_index([[0, 2], [1]], world_size=4) == [0, 1, 0, -1]


def test_rank_grid_of_the_same_placement_is_kept() -> None:
    """A keystroke that places the ranks as the one before (the same placement tuple) reuses the grid."""
    placement = tuple((rank // 8, rank % 8) for rank in range(64))
    grid = rank_grid(placement, 8, 8)
    assert rank_grid(placement, 8, 8) is grid
    other = tuple(reversed(placement))
    assert rank_grid(other, 8, 8) == list(reversed(grid)) and rank_grid(placement, 8, 8) == grid


@pytest.mark.parametrize(
    ("members", "placement", "node", "hops", "off_node"),
    [
        ([0, 1, 2, 3], [(0, 0), (0, 1), (0, 2), (0, 3)], 0, ((0, 1), (1, 2), (2, 3), (3, 0)), 0),
        ([4, 5], [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (0, 5)], 0, ((4, 5),), 0),
        ([0, 8], [(0, 0)] + [(0, g) for g in range(1, 8)] + [(1, 0)], 0, (), 1),
        ([0, 1, 2, 3], [(0, 0), (0, 1), (1, 0), (1, 1)], 0, ((0, 1),), 2),
    ],
    ids=["ring-in-node", "pair", "pair-across-nodes", "two-nodes"],
)
def test_ring_overlay(members: list[int], placement: list[tuple[int, int]], node: int, hops: tuple, off_node: int) -> None:
    """Hops in rank order, closed; the first rank's node is drawn, the rest counted."""
    overlay = ring_overlay(members, placement)
    assert (overlay.node, overlay.hops, overlay.off_node_hops) == (node, hops, off_node)


@pytest.mark.parametrize(
    ("members", "text"),
    [([0, 1, 2, 3, 4, 5, 6, 7], "0-7"), ([0, 8, 16], "0,8,16"), ([0, 1, 2, 3, 8, 9, 10, 11], "0-3,8-11"), ([5], "5")],
)
def test_rank_ranges(members: list[int], text: str) -> None:
    """Compact rank lists for labels."""
    assert rank_ranges(members) == text


def test_plot_lines_golden() -> None:
    """Two bars, the second twice as tall, over a two-line plot (hand-computed eighths)."""
    lines = plot_lines(((1024, 1.0), (4096, 2.0)), height=2, bar_width=3)
    assert lines == ["   ██ ", "██ ██ ", "1 KiB 4 KiB"]


def test_bench_points() -> None:
    """Peer copies average per size; collectives keep the best busbw per size of one op."""
    copies = (PeerCopy(0, 1, size_bytes=8, unidir_gbps=1.0), PeerCopy(1, 0, size_bytes=8, unidir_gbps=3.0))
    assert peer_copy_points(copies) == ((8, 2.0),)
    from linkscope.topo.model.measurements import CollectiveResult

    results = (
        CollectiveResult("all_reduce", 8, "float32", 1.0, 1.0, 2.0, 2),
        CollectiveResult("all_reduce", 8, "float32", 1.0, 1.0, 3.0, 2, in_place=True),
        CollectiveResult("all_gather", 8, "float32", 1.0, 1.0, 9.0, 2),
    )
    assert collective_points(results, "all_reduce") == ((8, 3.0),)


def test_form_cli_args_and_export() -> None:
    """The form as `linkscope check` flags, and the export JSON carries groups and the command."""
    snapshot = load_sample("dgx-h100")
    form = LayoutForm(sizes=(("tp", 4), ("pp", 2)), nodes=1, visible_devices=(0, 1, 2, 3, 4, 5, 6, 7))
    assert form.cli_args() == [
        "--tp", "4", "--pp", "2", "--order", "tp-cp-ep-dp-pp", "--nodes", "1", "--distribution", "block",
        "--visible-devices", "0,1,2,3,4,5,6,7",
    ]  # fmt: skip
    report = check_layout(snapshot, CheckRequest(sizes=form.sizes, visible_devices=form.visible_devices))
    command, document = export_command(snapshot, form, report)
    assert command.startswith("linkscope check sample:dgx-h100 --tp 4 --pp 2")
    data = json.loads(document)
    assert data["groups"]["tp"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert data["command"] == command


def test_suggestion_applies_to_form() -> None:
    """A suggestion's order, distribution and devices replace the form's; its speedup is shown."""
    suggestion = Suggestion(
        "tp-dp-pp", "block", (0, 3, 1, 2), ("--order tp-dp-pp",), (("CUDA_VISIBLE_DEVICES", "0,3,1,2"),), 1.0, 2.0
    )
    form = LayoutForm(sizes=(("tp", 2),), distribution="cyclic")
    applied = suggested_form(suggestion, form)
    assert applied is not None
    assert (applied.order, applied.distribution, applied.visible_devices) == ("tp-dp-pp", "block", (0, 3, 1, 2))
    assert "2.00x faster" in suggestion_text(suggestion).plain
    assert suggested_form(None, form) is None


def test_merge_measurements_appends() -> None:
    """New measurements are appended, so the newest copy of a pair wins in the grid."""
    old = Measurements("a", peer_copies=(PeerCopy(0, 1, size_bytes=8, unidir_gbps=1.0),))
    new = Measurements("b", peer_copies=(PeerCopy(0, 1, size_bytes=8, unidir_gbps=2.0),))
    merged = merge_measurements(old, new)
    assert merged.source == "a + b" and len(merged.peer_copies) == 2
    assert gpu_cells(nvswitch_host(), merged)[0][1].measured_gbps == 2.0


def test_reduced_links_on_the_degraded_sample() -> None:
    """On dgx-h100-degraded GPU 3's NV16 pairs are below the box's best NV18; the others are not."""
    cells = gpu_cells(load_sample("dgx-h100-degraded").host, None)
    reduced = {(cell.row, cell.col) for row in cells for cell in row if cell.reduced}
    assert reduced == {(3, other) for other in range(8) if other != 3} | {(other, 3) for other in range(8) if other != 3}
    assert cells[0][3].best_gbps == 450.0 and cells[0][3].expected is not None and cells[0][3].expected.spec_gbps == 400.0


def test_bench_adapter_drives_the_real_engine_on_cpu_processes() -> None:
    """The Bench tab's collective path runs the real worker processes (gloo here, NCCL on GPUs) and reports progress."""
    import threading

    pytest.importorskip("torch")
    from linkscope.tui.bench_adapter import _collective
    from linkscope.tui.services import BenchRequest

    seen: list[float] = []
    request = BenchRequest(kind="all_gather", sizes_bytes=(1024, 65536))
    measurements = _collective(request, 2, lambda step: seen.append(step.fraction), threading.Event(), backend="gloo")
    rows = [row for row in measurements.collectives if row.op == "all_gather"]
    assert [row.size_bytes for row in rows] == [1024, 65536]
    assert all(row.wrong == 0 and row.nranks == 2 and row.busbw_gbps > 0 for row in rows)
    assert seen and seen[-1] == pytest.approx(1.0)


def test_bench_adapter_keeps_what_a_stopped_sweep_measured() -> None:
    """Stop pressed once the first size is reported: the rows measured before the stop come back."""
    import threading

    pytest.importorskip("torch")
    from linkscope.tui import bench_adapter
    from linkscope.tui.services import BenchPlan, BenchRequest

    plan = BenchPlan(kinds=("all_reduce",), backend="gloo", processes=2, where="gloo on this machine's CPUs")
    cancel = threading.Event()
    request = BenchRequest(kind="all_reduce", sizes_bytes=tuple(1024 << k for k in range(15)))  # 1 KiB to 16 MiB
    measurements = bench_adapter.run_request(plan, request, lambda step: cancel.set(), cancel)
    sizes = [row.size_bytes for row in measurements.collectives]
    assert sizes and sizes == sorted(sizes) and len(sizes) < 15
    assert any(note.startswith("run cut short (cancelled)") for note in measurements.notes)


def test_long_host_names_stay_distinct_in_row_labels() -> None:
    """Two nodes of one long host name keep the end that tells them apart; a lone name keeps its head."""
    from linkscope.tui.widgets.cell_grid import short_labels

    assert short_labels(["dgx-h100-degraded#0", "dgx-h100-degraded#1"], 14) == ["dgx-h100-de~#0", "dgx-h100-de~#1"]
    shown = short_labels(["gpu-node-017.cluster.example.com", "gpu-node-018.cluster.example.com"], 14)
    assert len(set(shown)) == 2 and all(len(label) <= 14 for label in shown) and "017" in shown[0]
    assert short_labels(["dgx-h100-degraded"], 14) == ["dgx-h100-degr~"]
    assert short_labels(["node-a", "node-b"], 14) == ["node-a", "node-b"]
    same = short_labels(["x" * 30, "x" * 30], 14)
    assert len(set(same)) == 2 and all(len(label) <= 14 for label in same)


@pytest.mark.parametrize("width", [12, 31, 40, 62, 100, 200])
def test_a_long_sweep_fits_the_plot_width(width: int) -> None:
    """31 sizes (8 B to 8 GiB, an imported nccl-tests sweep) never draw a line wider than the plot:
    bars narrow, then every k-th size is drawn, first and last always."""
    from linkscope.tui.widgets.bandwidth_plot import fit_points

    points = tuple((1 << exponent, float(exponent)) for exponent in range(3, 34))
    lines = plot_lines(points, height=6, width=width)
    assert len(lines) == 7 and all(len(line) <= width for line in lines)
    shown, bar_width = fit_points(points, width)
    assert shown[0] == points[0] and shown[-1] == points[-1] and len(shown) * bar_width <= width
    assert len(lines[0]) == len(shown) * bar_width
    if width >= 62:
        assert shown == points


def test_the_six_tabs_are_views_bound_to_the_snapshot_once() -> None:
    """tui/tabs/ holds the six tab views (widgets, not Screens); the app binds its snapshot into each with data_bind
    instead of assigning it to every view by hand."""
    import inspect
    import re

    from textual.screen import Screen

    from linkscope.tui import app as app_module
    from linkscope.tui.tabs import bench, links, monitor, ranks, steps, topology

    views = [module for module in (links, topology, ranks, bench, monitor, steps)]
    for module in views:
        classes = [value for _, value in inspect.getmembers(module, inspect.isclass) if value.__module__ == module.__name__]
        assert classes and not any(issubclass(cls, Screen) for cls in classes), module.__name__
    source = inspect.getsource(app_module)
    assert source.count(".data_bind(") == 6 and source.count("LinkscopeApp.snapshot)") == 6
    assert not re.search(r"query_one\(\w+View\)\.(snapshot|live|nccl) =", source)
