"""The NCCL_DEBUG=INFO reader on real logs: ranks, hosts, transports per edge, findings, hand-checked per file."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from linkscope.topo.formats.nccl_log import read_nccl_log_stream
from linkscope.topo.formats.nccl_log_model import NcclLog, bus_id_to_pci
from linkscope.topo.nccl.checks import nccl_findings, rank_hosts, same_host
from support.paths import FIXTURES

REAL = FIXTURES / "real" / "nccl_debug"


@dataclass(frozen=True)
class Expected:
    """What a person reading the file sees in it."""

    hosts: dict[int, str]
    """rank -> host, for every rank whose host the file shows."""
    transports: dict[tuple[str, bool | None], int]
    """(transport, same host?) -> distinct connection lines."""
    codes: tuple[str, ...]
    version: str | None = None
    skipped: int = 0
    bus_ids: dict[int, str] = field(default_factory=dict)
    comm: str | None = None
    """The communicator every rank belongs to (None: the log never shows one)."""


EXPECTED: dict[str, Expected] = {
    "a100-4node-2gpu-collnet-fallback-p2p-net.txt": Expected(
        hosts={0: "gpu34", 1: "gpu34", 2: "gpu36", 3: "gpu36", 4: "gpu40", 5: "gpu40", 6: "gpu41", 7: "gpu41"},
        transports={("P2P", True): 24, ("NET", False): 58, ("COLLNET", None): 4},
        codes=("env-override", "nccl-warn", "nccl-warn"), version="2.23.4+cuda12.4",
        bus_ids={0: "7000", 1: "b000", 2: "88000", 3: "cb000", 4: "4c000", 5: "88000", 6: "7000", 7: "88000"},
        comm="0x70fba02a8d314739"),
    "aws-ofi-nccl-715-sagemaker-timestamp-libfabric-pxn.txt": Expected(
        hosts={2: "algo-1", 3: "algo-1", 5: "algo-1"}, transports={("NET", None): 6}, codes=()),
    "consumer-2gpu-msi-ms7d31-shm-socket.txt": Expected(
        hosts={0: "husein-MS-7D31", 1: "husein-MS-7D31"}, transports={("SHM", True): 4},
        codes=("intra-host-shm",), version="2.27.5+cuda12.9", bus_ids={0: "1000", 1: "8000"},
        comm="0x798dcd8b6f24bb47"),
    "easydistill-4-python-logging-8gpu-rings.txt": Expected(  # `Ring 00 : 7 -> 0 -> 1`: rank 0 logs on this host
        hosts={0: "g340-cd51-4900-b72a-d104-a9bf-df48"}, transports={}, codes=(), skipped=1),
    "nccl-1189-h20-2node-4gpu-cumem-ib-new-ring-lines.txt": Expected(
        hosts={0: "H20-GPU-05", 1: "H20-GPU-05", 2: "H20-GPU-06", 3: "H20-GPU-06"},
        transports={("P2P", True): 5, ("NET", False): 9}, codes=(),
        bus_ids={0: "18000", 1: "38000", 2: "18000", 3: "38000"}, comm="0xf021d9037f9243d8"),
    "nccl-1412-2node-16gpu-comm-rings.txt": Expected(
        hosts={rank: "swat1-04" for rank in (1, 2, 3, 5, 6, 7)}, transports={}, codes=(), comm="16 ranks"),
    "nccl-1609-h800-4gpu-shm-no-p2p.txt": Expected(
        hosts={2: "tj5-sc-ai-h800r-dev01", 3: "tj5-sc-ai-h800r-dev01"}, transports={("SHM", True): 12},
        codes=("intra-host-shm",), skipped=0),
    "nccl-226-aws-64rank-ring-socket-nobracket.txt": Expected(
        hosts={44: "ip-172-31-12-210", 33: "ip-172-31-4-37", 35: "ip-172-31-0-119", 45: "ip-172-31-5-50",
               40: "ip-172-31-3-134", 52: "ip-172-31-1-93", 41: "ip-172-31-11-219", 47: "ip-172-31-11-103",
               36: "ip-172-31-10-149", 42: "ip-172-31-13-243", 48: "ip-172-31-3-74", 46: "ip-172-31-0-110",
               37: "ip-172-31-8-230", 38: "ip-172-31-7-227", 49: "ip-172-31-3-47"},
        transports={("NET", False): 10, ("NET", None): 5}, codes=("net-socket",), skipped=1),
    "nccl-300-openmpi-4gpu-nccl-2.5.6-lo-socket.txt": Expected(
        hosts={}, transports={}, codes=(), version="2.5.6+cuda10.2"),
    "nccl-385-16gpu-old-ring-busid-p2p-ib.txt": Expected(
        hosts={}, transports={("P2P", None): 9, ("NET", None): 2}, codes=(),
        bus_ids={12: "41000", 11: "2d000", 13: "42000", 14: "4c000", 15: "4d000", 8: "1e000", 3: "2d000",
                 2: "28000", 1: "23000", 9: "23000", 0: "1e000", 10: "28000"}),
    "nccl-429-2node-16gpu-busid-direct-pointer-ib-gdr.txt": Expected(
        hosts={11: "machine-1", 14: "machine-1", 13: "machine-1", 15: "machine-1",
               5: "machine-2", 1: "machine-2", 7: "machine-2"},
        transports={("P2P", None): 8, ("P2P", True): 3, ("NET", False): 2, ("NET", None): 1},
        codes=(), skipped=1, bus_ids={11: "3e000", 9: "1b000", 5: "89000", 7: "b2000", 14: "b1000", 1: "1b000", 0: "1a000",
                 13: "89000", 10: "3d000", 15: "b2000", 6: "b1000"}),
    "nccl-687-2node-4gpu-busid-ipc-read-ib-gdr.txt": Expected(
        hosts={0: "cosmos-hpc-100a45", 1: "cosmos-hpc-100a45", 3: "cosmos-hpc-100a45",
               4: "cosmos-hpc-100a55", 5: "cosmos-hpc-100a55", 7: "cosmos-hpc-100a55"},
        transports={("P2P", True): 7, ("NET", None): 4}, codes=(), skipped=1,
        bus_ids={0: "7000", 1: "a000", 2: "44000", 3: "4a000", 4: "7000", 5: "a000", 6: "44000", 7: "4a000"}),
    "nccl-707-1host-4gpu-intra-host-ib.txt": Expected(
        hosts={rank: "10-90-43-152" for rank in range(4)}, transports={("NET", True): 12},
        codes=("intra-host-net",), skipped=1, bus_ids={0: "87000", 1: "8d000", 2: "c7000", 3: "ca000"}),
    "nccl-892-h800-8gpu-direct-pointer-algo-env.txt": Expected(
        hosts={7: "036260b61d3a", 4: "036260b61d3a"}, transports={("P2P", True): 1, ("P2P", None): 1},
        codes=("env-override",)),
    "nccl-899-2node-ib-without-gdr.txt": Expected(
        hosts={0: "6a5a91752e39", 1: "21346d5cefce"}, transports={("NET", False): 7}, codes=("net-no-gdr",),
        bus_ids={0: "1a000", 1: "1a000"}),
    "nccl-tests-29-4node-32gpu-ring-devindex-p2p-ipc.txt": Expected(
        hosts={26: "server4", 31: "server4", 30: "server4", 24: "server4",
               23: "server3", 17: "server3", 22: "server3", 21: "server3", 16: "server3", 20: "server3",
               8: "server2", 12: "server2", 14: "server2", 13: "server2", 15: "server2",
               7: "server1", 1: "server1", 6: "server1", 4: "server1"},
        transports={("P2P", True): 12, ("P2P", None): 7}, codes=(), skipped=1),
    "nccl-1814-h100-64rank-nvls-channels.txt": Expected(
        hosts={rank: "hostname-test" for rank in (32, 34, 35, 36)}, transports={}, codes=(), skipped=1,
        bus_ids={32: "18000", 34: "49000", 35: "59000", 36: "9b000"}, comm="0x5ae77eb5ea4ec1ee"),
    "ray-59778-vllm-ray-prefix-comm-suffix.txt": Expected(
        hosts={16: "k8s17"}, transports={("P2P", None): 1}, codes=(), skipped=1,
        bus_ids={16: "17000", 18: "21000"}, comm="32 ranks"),
    "vllm-27521-8gpu-cumem-read-fused-with-python-logging.txt": Expected(
        hosts={1: "os-node-created-f8h54"}, transports={("P2P", None): 4}, codes=(), skipped=1),
}


def read(path: Path) -> NcclLog:
    with open(path, "rb") as handle:
        return read_nccl_log_stream(handle, path.name)


def test_the_logs_with_expectations_are_there() -> None:
    """The logs below keep their by-hand readings; every real log's facts are checked by the corpus test."""
    assert set(EXPECTED) <= {path.name for path in REAL.glob("*.txt")}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_log_reads_as_a_person_reads_it(name: str) -> None:
    expected = EXPECTED[name]
    log = read(REAL / name)
    hosts = {rank: host for (_, rank), host in rank_hosts(log).items()}
    assert hosts == expected.hosts
    transports = Counter((edge.transport, same_host(edge, rank_hosts(log))) for edge in log.edges)
    assert dict(transports) == expected.transports
    assert tuple(sorted(finding.code for finding in nccl_findings(log))) == expected.codes
    assert log.version == expected.version
    assert log.skipped_count == expected.skipped
    assert {rank.rank: rank.bus_id for rank in log.ranks if rank.bus_id} == expected.bus_ids
    assert {rank.comm for rank in log.ranks} <= {expected.comm}


def test_first_line_of_each_real_log_names_its_source() -> None:
    for path in REAL.glob("*.txt"):
        assert path.read_text().startswith("# source: "), path.name


def test_comm_and_rings_of_a_full_log() -> None:
    log = read(REAL / "a100-4node-2gpu-collnet-fallback-p2p-net.txt")
    (comm,) = log.communicators
    assert (comm.key, comm.nranks, comm.nnodes) == ("0x70fba02a8d314739", 8, 4)
    assert comm.rings == tuple((channel, tuple(range(8))) for channel in range(3))
    assert (0, 0, (1, 4), -1) in comm.trees and (4, 1, (5,), 3) in comm.trees
    assert comm.channels == (3, 3, 0)
    assert dict(log.env) == {"NCCL_COLLNET_ENABLE": "1"}
    assert {error.text for error in log.errors} == {"transport.cc:356 -> 2", "transport/coll_net.cc:1358 -> 2"}
    pxn = [edge for edge in log.edges if edge.detail == "NET/IBext_v8/5(2)/GDRDMA"]
    assert {(edge.src, edge.dst, edge.side) for edge in pxn} == {(3, 4, "send")}


def test_channel_counts_without_collnet_field() -> None:
    """NCCL 2.18 prints `16 coll channels, 0 nvls channels, ...` with no CollNet count."""
    log = read(REAL / "nccl-892-h800-8gpu-direct-pointer-algo-env.txt")
    assert [comm.channels for comm in log.communicators] == []  # no comm line in this piece: nothing to attribute to
    log = read(REAL / "consumer-2gpu-msi-ms7d31-shm-socket.txt")
    assert [comm.channels for comm in log.communicators] == [(2, 2, 0)]


def test_text_quoting_nccl_is_not_a_line_nccl_wrote() -> None:
    """The file's own source line quotes `NCCL WARN ...` in an issue title: not a warning of the log."""
    log = read(REAL / "nccl-1814-h100-64rank-nvls-channels.txt")
    assert log.warnings == () and [comm.key for comm in log.communicators] == ["0x5ae77eb5ea4ec1ee"]


def test_newer_lines_name_their_communicator_at_the_end() -> None:
    """`... via P2P/IPC comm 0x5609976f9470 nRanks 32`: the suffix is not part of the detail, and it names the comm."""
    log = read(REAL / "ray-59778-vllm-ray-prefix-comm-suffix.txt")
    assert [(edge.detail, edge.comm) for edge in log.edges] == [("P2P/IPC", "32 ranks")]
    (comm,) = log.communicators
    assert comm.nranks == 32 and (16, 0, (17, 24), 0) in comm.trees and len(comm.trees) == 16
    assert dict(log.env) == {"NCCL_MIN_P2P_NCHANNELS": "16", "NCCL_NCHANNELS_PER_PEER": "16"}


def test_receive_lines_name_the_receiver_as_the_printing_rank() -> None:
    log = read(REAL / "nccl-899-2node-ib-without-gdr.txt")
    assert {rank.rank: rank.cuda_dev for rank in log.ranks} == {0: 0, 1: 0}


def test_device_index_brackets_are_not_bus_ids() -> None:
    log = read(REAL / "nccl-1609-h800-4gpu-shm-no-p2p.txt")
    assert {rank.rank: (rank.cuda_dev, rank.device_index, rank.bus_id) for rank in log.ranks} == {
        2: (2, 6, None), 3: (3, 7, None)}


def test_plugin_net_with_spaces_and_pxn_detail_is_kept_whole() -> None:
    log = read(REAL / "aws-ofi-nccl-715-sagemaker-timestamp-libfabric-pxn.txt")
    assert {edge.detail for edge in log.edges} == {
        "NET/AWS Libfabric/1/GDRDMA/Shared", "NET/AWS Libfabric/1(2)/GDRDMA/Shared", "NET/AWS Libfabric/0(0)/GDRDMA/Shared"}
    assert {rank.rank: rank.host for rank in log.ranks if rank.host} == {2: "algo-1", 3: "algo-1", 5: "algo-1"}


@pytest.mark.parametrize(("compact", "pci"), [
    ("1b000", "00000000:1B:00.0"), ("7000", "00000000:07:00.0"), ("1e0", "00000000:00:1E.0"),
    ("101c0", "00000000:10:1C.0"), ("100000cb000", "00100000:CB:00.0")])
def test_compact_bus_ids_read_like_nvidia_smi(compact: str, pci: str) -> None:
    assert bus_id_to_pci(compact) == pci


def test_text_says_collnet_fell_back_and_counts_the_rings_not_shown(capsys: pytest.CaptureFixture[str]) -> None:
    """NCCL prints '3 collnet channels' and then 'Cannot initialize CollNet, using point-to-point network instead':
    the summary says both; the third ring order is counted, not dropped silently."""
    from linkscope.cli import main

    log = FIXTURES / "real" / "nccl_debug" / "a100-4node-2gpu-collnet-fallback-p2p-net.txt"
    main(["nccl-log", str(log)])
    out = capsys.readouterr().out
    assert "3 CollNet channels" in out and "CollNet then failed to initialise" in out
    assert "... 1 more ring order(s)" in out


def test_shm_where_the_snapshot_says_p2p_is_unsupported_is_info(capsys: pytest.CaptureFixture[str]) -> None:
    """Two consumer GPUs whose topo -p2p says NS can only talk through SHM: without a machine that is a warning
    (exit 1); laid on that machine it is what the box does at best (info, exit 0)."""
    from linkscope.cli import main

    log = str(FIXTURES / "real" / "nccl_debug" / "consumer-2gpu-msi-ms7d31-shm-socket.txt")
    assert main(["nccl-log", log, "--json"]) == 1
    alone = {f["code"]: f["severity"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert alone["intra-host-shm"] == "warning"
    main(["nccl-log", log, "--snapshot", "sample:consumer-2gpu", "--json"])
    placed = {f["code"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    assert placed["intra-host-shm"]["severity"] == "info" and "P2P is not supported" in placed["intra-host-shm"]["message"]


def test_a_log_from_another_machine_is_said_to_be(capsys: pytest.CaptureFixture[str]) -> None:
    """The 4-node A100 log laid on the 2-GPU consumer sample: its bus ids are not the sample's, so the ranks were
    placed by device number and the note asks whether the snapshot is the right machine."""
    from linkscope.cli import main

    log = str(FIXTURES / "real" / "nccl_debug" / "a100-4node-2gpu-collnet-fallback-p2p-net.txt")
    main(["nccl-log", log, "--snapshot", "sample:consumer-2gpu", "--json"])
    notes = json.loads(capsys.readouterr().out)["placement"]["notes"]
    assert any("are not among the snapshot's" in note and "4c000" in note for note in notes)
