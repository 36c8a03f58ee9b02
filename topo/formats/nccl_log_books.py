"""What an NCCL log says of its hosts, messages and NVLink SHARP, gathered line by line for
:mod:`topo.formats.nccl_log_reader`, and its rank entries frozen.

Hosts: every host that wrote an NCCL line; the host nccl-tests' `# Rank N ... on HOST device D` lines give each
rank; and the host names that are pieces of another's, left by processes writing at once (`xn0` and
`x3006c0s19b1x3006c0s1b0n0` beside `x3006c0s19b1n0`). NVLS: NCCL prints no connection line for it, so its signs
are kept: each `NVLS comm 0x... headRank H nHeads N` set-up, the most `nvls channels` a line printed,
`Connected NVLS tree`, and `NVLS multicast support is (not) available on dev D`.
"""

from __future__ import annotations

from linkscope.topo.common.limits import MAX_EDGES, MAX_PARSED_LINES
from linkscope.topo.formats.nccl_log_lines import NVLS_COMM, NVLS_MULTICAST
from linkscope.topo.formats.nccl_log_model import Message, Nvls, NvlsSetup, Rank


class HostBook:
    """The hosts of a log, as its lines name them."""

    def __init__(self) -> None:
        self.first_seen: dict[str, None] = {}
        self.lines: dict[tuple[str, int | None], int] = {}
        """Lines per (host, pid): a host seen once under the pid of another, much busier host is a fragment."""
        self.test_hosts: dict[int, str] = {}
        """Rank -> host from nccl-tests' `# Rank N ... on HOST device D` lines."""

    def saw(self, host: str, pid: int | None) -> None:
        """A line of `host` (process `pid`)."""
        key = (host, pid)
        count = self.lines.get(key)
        if count is not None:  # seen before: its host was taken then, when there was room
            self.lines[key] = count + 1
            return
        self.add(key, 1)

    def meet(self, host: str, pid: int | None) -> None:
        """A line of `host` (process `pid`) that :meth:`saw_again` will count: the process is taken now, when new."""
        key = (host, pid)
        if key not in self.lines:
            self.add(key, 0)

    def add(self, key: tuple[str, int | None], count: int) -> None:
        """A process not seen before, with `count` lines so far (each table has room for as many as it holds)."""
        if key[0] not in self.first_seen and len(self.first_seen) < MAX_PARSED_LINES:
            self.first_seen[key[0]] = None
        if len(self.lines) < MAX_PARSED_LINES:
            self.lines[key] = count

    def saw_again(self, counts: dict[tuple[str, int], int]) -> None:
        """More lines of processes seen before: `counts` per (host, pid)."""
        for key, count in counts.items():
            if key in self.lines:
                self.lines[key] += count

    def test_rank(self, rank: int, host: str) -> None:
        """nccl-tests' rank line: `rank` runs on `host`."""
        self.test_hosts.setdefault(rank, host)
        if len(self.first_seen) < MAX_PARSED_LINES:
            self.first_seen.setdefault(host)

    def fragments(self) -> dict[str, str]:
        """Host names that are pieces of another's: seen on a line or two under the pid of a host seen on many more,
        and spelled like it (one ends as the other does, or both start and end alike). Each maps to the host it is
        a piece of."""
        by_pid: dict[int | None, list[tuple[int, str]]] = {}
        for (host, pid), count in self.lines.items():
            by_pid.setdefault(pid, []).append((count, host))
        found: dict[str, str] = {}
        for hosts in by_pid.values():
            if len(hosts) < 2:
                continue
            busiest_count, busiest = max(hosts)
            for count, host in hosts:
                alike = busiest.endswith(host) or host.endswith(busiest) or \
                    (busiest[:1] == host[:1] and len(host) >= 2 and busiest.endswith(host[-2:]))
                if host != busiest and count <= 2 and busiest_count >= 5 * count and alike:
                    found[host] = busiest
        return {host: real for host, real in found.items()
                if not any(other == host and lines > 2 for (other, _), lines in self.lines.items())}

    def place_ranks(self, ranks: dict[tuple[str | None, int], dict[str, object]],
                    comm_sizes: dict[str, tuple[int | None, int | None]]) -> dict[str, str]:
        """Give each rank entry the host nccl-tests' rank lines name where the log named none (in communicators of
        the test's size, or of unknown size: those are the test's own ranks), replace host fragments by the host
        they are pieces of, and return the fragments."""
        size = max(self.test_hosts) + 1 if self.test_hosts else None
        fragments = self.fragments()
        for (comm, rank), entry in ranks.items():
            nranks = comm_sizes.get(comm or "", (None, None))[0]
            if "host" not in entry and rank in self.test_hosts and nranks in (None, size):
                entry["host"] = self.test_hosts[rank]
            if entry.get("host") in fragments:
                entry["host"] = fragments[str(entry["host"])]
        return fragments

    def names(self, fragments: dict[str, str]) -> tuple[str, ...]:
        return tuple(host for host in self.first_seen if host not in fragments)


class NvlsBook:
    """The signs of NVLink SHARP in a log."""

    def __init__(self) -> None:
        self.setups: dict[tuple[str | None, int], NvlsSetup] = {}
        self.channels: int | None = None
        self.tree = False
        self.multicast: dict[tuple[str | None, int], bool] = {}

    def line(self, message: str, host: str | None, pid: int | None, number: int,
             pointer_comm: dict[tuple[str | None, int | None, str], str],
             process_comms: dict[tuple[str | None, int | None], list[tuple[str, int, int]]]) -> None:
        """`NVLS comm 0x... headRank H nHeads N ...` (its communicator and rank from the comm pointer NCCL printed)
        and `NVLS multicast support is (not) available on dev D`."""
        multicast = NVLS_MULTICAST.match(message)
        if multicast is not None:
            self.multicast.setdefault((host, int(multicast.group(2))), multicast.group(1) is None)
            return
        setup = NVLS_COMM.match(message)
        if setup is None or len(self.setups) >= MAX_EDGES:
            return
        comm = pointer_comm.get((host, pid, setup.group(1).lower()))
        rank = next((rank for key, rank, _ in reversed(process_comms.get((host, pid), ())) if key == comm), None)
        self.setups.setdefault((comm, rank if rank is not None else -1 - len(self.setups)), NvlsSetup(
            comm=comm, rank=rank, host=host, head_rank=int(setup.group(2)), nheads=int(setup.group(3)), line=number))

    def frozen(self) -> Nvls:
        return Nvls(setups=tuple(sorted(self.setups.values(), key=lambda setup: setup.line)), channels=self.channels,
                    tree=self.tree, multicast=tuple((host, dev, ok) for (host, dev), ok in self.multicast.items()))


class Tally:
    """How often one warning or error text was seen, and where first."""

    __slots__ = ("count", "host", "line")

    def __init__(self, host: str | None, line: int) -> None:
        self.host = host
        self.line = line
        self.count = 1


def rank_of(comm: str | None, rank: int, facts: dict[str, object]) -> Rank:
    def number(key: str) -> int | None:
        value = facts.get(key)
        return value if isinstance(value, int) else None

    def text(key: str) -> str | None:
        value = facts.get(key)
        return value if isinstance(value, str) else None

    return Rank(comm=comm, rank=rank, host=text("host"), pid=number("pid"), cuda_dev=number("cuda_dev"),
                nvml_dev=number("nvml_dev"), bus_id=text("bus_id"), device_index=number("device_index"))


def messages(table: dict[str, Tally]) -> tuple[Message, ...]:
    return tuple(Message(text=text, host=tally.host, line=tally.line, count=tally.count) for text, tally in table.items())
