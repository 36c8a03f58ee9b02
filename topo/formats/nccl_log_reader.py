"""The state machine behind :mod:`topo.formats.nccl_log`: what each NCCL line says, accumulated.

Every pattern is anchored or bounded, so a long adversarial line costs linear time. Memory grows
with the distinct ranks, connections and messages, each table capped, never with the log's size.
"""

from __future__ import annotations

from linkscope.topo.common.limits import MAX_EDGES, MAX_KEPT_MESSAGES, MAX_MESSAGE_CHARS, MAX_NCCL_RANK, MAX_PARSED_LINES
from linkscope.topo.formats.lines import Line
from linkscope.topo.formats.nccl_log_books import HostBook, NvlsBook, Tally
from linkscope.topo.formats.nccl_log_frozen import frozen_log
from linkscope.topo.formats.nccl_log_lines import (
    BUS_ID,
    CHANNEL_COUNTS,
    COLLNET,
    COMM,
    COMM_ID,
    COMM_SUFFIX,
    CONNECTION_START,
    CUT_PREFIX,
    ENV,
    ERROR_TRACE,
    INIT,
    INIT_END,
    LEADING,
    MARKER,
    PREFIX,
    PREFIX_WINDOW,
    RING_NEIGHBOURS,
    RING_ORDER,
    SEPARATORS,
    SIZE_KEY,
    TEST_RANK,
    TREE_ITEM,
    TREE_NEIGHBOURS,
    TREES,
    UNREADABLE,
    VERSION,
    Connection,
    Ends,
    Fact,
    parse_connection,
    transport_class,
    tree_links,
    worth_reading,
)
from linkscope.topo.formats.nccl_log_model import NcclLog
from linkscope.topo.formats.nccl_log_topology import TopologyBook

Prefix = tuple[str, int, int, bool]
"""What NCCL's prefix of a line says: (host, pid, cudaDev, is a warning)."""
Told = tuple[str | None, int, int, str | None, int | None, int | None, Fact | None, Fact | None]
"""What a connection line tells of its ranks: (comm, printer, other, host, pid, dev, src's fact, dst's fact)."""
Link = tuple[str | None, int, int, str | None, str, Told]
"""What a connection line says on whichever channel: (comm, src, dst, side, detail, what it tells of its ranks)."""


class LogReader:
    """Accumulates what the lines say; :meth:`result` freezes it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.version: str | None = None
        self.lines = 0
        self.nccl_lines = 0
        self.skipped: list[int] = []
        self.skipped_count = 0
        self.edges_dropped = 0
        self.ranks: dict[tuple[str | None, int], dict[str, object]] = {}
        self.edges: dict[tuple[str | None, int, int | None, int, str | None, str], int] = {}
        self.comm_sizes: dict[str, tuple[int | None, int | None]] = {}
        self.rings: dict[tuple[str | None, int], tuple[int, ...]] = {}
        self.trees: dict[tuple[str | None, int, int], tuple[tuple[int, ...], int]] = {}
        self.env: dict[str, str] = {}
        self.warnings: dict[str, Tally] = {}
        self.errors: dict[str, Tally] = {}
        self.pointer_comm: dict[tuple[str | None, int | None, str], str] = {}
        """(host, pid, comm pointer) -> communicator key."""
        self.parsed: dict[str, Connection | tuple[()]] = {}
        """Connection messages already parsed (the same line recurs for every new communicator)."""
        self.told: set[Told] = set()
        """What connection lines said of their ranks, each told once (a rank prints the same on every channel)."""
        self.channel_counts: dict[str, tuple[int | None, ...]] = {}
        self.prefixes: dict[str, Prefix] = {}
        """NCCL prefixes already read, by their text."""
        self.suffix: tuple[str, int, str | None] | None = None
        """(comm pointer, rank count, bus id) the line being read ends with, until a rank claims it."""
        self.aliases: dict[str, set[str]] = {}
        """Provisional key (`8 ranks`) -> the commIds its pointers later showed."""
        self.process_comms: dict[tuple[str | None, int | None], list[tuple[str, int, int]]] = {}
        """(host, pid) -> (communicator key, this process's rank in it, rank count), latest last."""
        self.joins = 0
        self.prefix: Prefix = ("", 0, 0, False)
        """What the prefix of the line being read said, when it had NCCL's own."""
        self.settled = False
        """Set by a line whose second reading, while no process joins a communicator, would change nothing but the
        line counts (a connection); whoever reads a line clears it first."""
        """How many times a process joined a communicator (an entry added to :attr:`process_comms`)."""
        self.topology = TopologyBook()
        self.hosts = HostBook()
        self.nvls = NvlsBook()

    def skip(self, number: int) -> None:
        self.skipped_count += 1
        if len(self.skipped) < MAX_KEPT_MESSAGES:
            self.skipped.append(number)

    def keep(self, raw: str) -> bool:
        """Called once per raw line, in order: a line that starts with NCCL's own prefix and needs no
        cleaning is read here at once; the cleaner gets only the other lines that may matter."""
        self.lines += 1
        if "NCCL" in raw and raw[:1].isalnum() and raw.isascii() and "\x1b" not in raw and "\r" not in raw:
            text = raw.rstrip()
            leading = self.leading_prefix(text)
            if leading is not None:
                self.feed_prefixed(text, *leading, self.lines)
                return False
        return worth_reading(raw)  # most lines of a log do not name NCCL

    def leading_prefix(self, text: str) -> tuple[int, Prefix] | None:
        """Where NCCL's own prefix `host:pid:tid [dev] NCCL INFO ` that starts `text` ends, and what it says; None
        when `text` does not start with one. A process writes the same prefix on every line, so a prefix read
        once is known by its text (the match of :data:`LEADING` depends on nothing after the prefix)."""
        marker = text.find(" NCCL INFO ")
        if marker > 0:
            end = marker + len(" NCCL INFO ")
            known = self.prefixes.get(text[:end])
            if known is not None:
                return end, known
        leading = LEADING.match(text)
        if leading is None:
            return None
        end = leading.end()
        known = (leading.group(1), int(leading.group(2)), int(leading.group(3)), leading.group(4) == "WARN")
        if len(self.prefixes) < MAX_PARSED_LINES:
            self.prefixes[text[:end]] = known
        return end, known

    def feed_prefixed(self, text: str, end: int, prefix: Prefix, number: int) -> None:
        """A line that starts with NCCL's own `host:pid:tid [dev] NCCL INFO` prefix (the common case), which ends
        at `end` and says `prefix`."""
        if text.find("NCCL INFO", end) >= 0 or text.find("NCCL WARN", end) >= 0:
            self.skip(number)  # two processes' lines fused into one
            return
        self.nccl_lines += 1
        self.prefix = prefix
        host, pid, dev, warn = prefix
        self.hosts.saw(host, pid)
        if warn:
            self.note(self.warnings, text[end:].strip(), host, number)
        else:
            self.info(text[end:], host, pid, dev, number)

    def feed(self, line: Line) -> None:
        """A cleaned line (launcher prefixes and escapes removed)."""
        text = line.text
        if text == UNREADABLE:
            self.skip(line.number)
            return
        if "NCCL" not in text:
            test_rank = TEST_RANK.match(text.strip()) if " Pid " in text else None
            if test_rank is not None and int(test_rank.group(1)) <= MAX_NCCL_RANK:
                self.hosts.test_rank(int(test_rank.group(1)), test_rank.group(2))
            return
        leading = self.leading_prefix(text)
        if leading is not None:
            self.feed_prefixed(text, *leading, line.number)
            return
        marker = MARKER.search(text)
        if marker is None:
            version = VERSION.search(text) if self.version is None else None
            if version is not None:
                self.version = version.group(1)
                self.nccl_lines += 1
            elif CUT_PREFIX.search(text):
                self.skip(line.number)  # NCCL's prefix, then the line cut off or overwritten
            elif "NCCL error" in text:  # what the framework raised, e.g. `DistBackendError: NCCL error in: ...`
                self.note(self.errors, text.strip()[:MAX_MESSAGE_CHARS], line.host, line.number)
            return
        if MARKER.search(text, marker.end()) is not None:
            self.skip(line.number)  # two processes' lines fused into one
            return
        prefix = PREFIX.search(text, max(0, marker.start() - PREFIX_WINDOW), marker.start())
        if prefix is None and marker.start() > 0:
            return  # `NCCL INFO` inside other text (a message quoting NCCL), not a line NCCL wrote
        start = prefix.start() if prefix is not None else marker.start()
        if start > 0 and not (text[start - 1].isspace() or text[start - 1] in SEPARATORS):
            self.skip(line.number)  # glued to other output: where NCCL's line starts is a guess
            return
        self.nccl_lines += 1
        host = prefix.group("host") if prefix is not None and prefix.group("host") else line.host
        pid = int(prefix.group("pid")) if prefix is not None and prefix.group("pid") else None
        if host is not None:
            self.hosts.saw(host, pid)
        dev = int(prefix.group("dev")) if prefix is not None else None
        message = text[marker.end():]
        if marker.group(1) == "WARN":
            self.note(self.warnings, message.strip(), host, line.number)
            return
        self.info(message, host, pid, dev, line.number)

    def note(self, table: dict[str, Tally], text: str, host: str | None, number: int) -> None:
        tally = table.get(text)
        if tally is not None:
            tally.count += 1
        elif len(table) < MAX_KEPT_MESSAGES:
            table[text] = Tally(host, number)

    def info(self, message: str, host: str | None, pid: int | None, dev: int | None, number: int) -> None:
        first = message[:1]
        if self.topology.line(message, host, pid, dev, number):
            return
        self.suffix = None
        if first in ("C", "R", "T") and " nRanks " in message:
            suffix = COMM_SUFFIX.search(message)
            if suffix is not None:
                self.suffix = (suffix.group(1).lower(), int(suffix.group(2)), suffix.group(3))
                message = message[:suffix.start()]
        if first in ("C", "R"):
            if self.connection(message, host, pid, dev, number):
                self.settled = True
                return
            if self.ring_order(message, host, pid):
                return
            if message.startswith("Connected NVLS tree"):
                self.nvls.tree = True
                return
            neighbours = RING_NEIGHBOURS.match(message)
            if neighbours is not None:
                self.neighbours(neighbours.group(2), (neighbours.group(1), neighbours.group(3)), host, pid, dev)
            elif CONNECTION_START.match(message):
                self.skip(number)
            return
        if first == "T" and message.startswith("Trees"):
            self.tree(message, host, pid, dev, number)
            return
        if first == "T" and (tree := TREE_NEIGHBOURS.match(message)) is not None:
            self.neighbours(tree.group(2), (tree.group(1), *tree.group(3).split("/")), host, pid, dev)
            return
        if first == "N" and message.startswith("NVLS"):
            self.nvls.line(message, host, pid, number, self.pointer_comm, self.process_comms)
            return
        if "comm 0x" in message:
            self.communicator(message, host, pid, dev, number)
            return
        if first == "N":
            if message.startswith("NCCL version"):
                version = VERSION.match(message)
                if version is not None and self.version is None:
                    self.version = version.group(1)
                return
            if message.startswith("NCCL_"):
                env = ENV.match(message)
                if env is not None:
                    self.env.setdefault(env.group(1), env.group(2))
                return
        if first.isdigit() and " coll channels" in message:
            counts = CHANNEL_COUNTS.match(message)
            if counts is not None and counts.group(3) is not None:
                self.nvls.channels = max(self.nvls.channels or 0, int(counts.group(3)))
            known = self.process_comms.get((host, pid))
            if counts is not None and known:
                self.channel_counts.setdefault(known[-1][0], tuple(
                    int(value) if value is not None else None for value in counts.groups()))
            return
        if " -> " in message and ERROR_TRACE.match(message):
            self.note(self.errors, message.strip(), host, number)

    def neighbours(self, me: str, others: tuple[str, ...], host: str | None, pid: int | None, dev: int | None) -> None:
        """`Ring 00 : 15 -> 0 -> 1` or `Tree 0 : -1 -> 0 -> 1/8/-1` (NCCL 2.5-2.12): this rank, where it runs, and
        the ranks next to it (each a rank of the communicator, though it may log nothing here)."""
        rank = int(me)
        known = [int(other) for other in others if other.lstrip("-").isdecimal() and int(other) >= 0]
        if max([rank, *known]) > MAX_NCCL_RANK:
            return
        comm = self.comm_of(host, pid, rank, max([rank, *known]))
        self.learn(comm, rank, host=host, pid=pid, cuda_dev=dev)
        for other in known:
            self.rank_entry(comm, other)

    def comm_of(self, host: str | None, pid: int | None, printer: int, highest: int) -> str | None:
        """The communicator a line of (host, pid) about rank `printer` belongs to: the one the line names
        (newer versions append `comm 0x... nRanks N`), else the latest of the process that fits."""
        if self.suffix is not None:
            pointer, nranks, bus = self.suffix
            self.suffix = None
            if printer < nranks and highest < nranks:
                key = self.pointer_comm.setdefault((host, pid, pointer), f"{nranks}{SIZE_KEY}")
                self.comm_sizes.setdefault(key, (nranks, None))
                known = self.process_comms.setdefault((host, pid), [])
                if (key, printer, nranks) not in known:
                    known.append((key, printer, nranks))
                    self.joins += 1
                if bus is not None:
                    self.learn(key, printer, bus_id=bus.lower())
                return key
        for key, rank, nranks in reversed(self.process_comms.get((host, pid), ())):
            if rank == printer and highest < nranks:
                return key
        return None

    def rank_entry(self, comm: str | None, rank: int) -> dict[str, object]:
        entry = self.ranks.get((comm, rank))
        if entry is None:
            entry = {}
            self.ranks[(comm, rank)] = entry
        return entry

    def learn(self, comm: str | None, rank: int, **facts: object) -> None:
        entry = self.rank_entry(comm, rank)
        for key, value in facts.items():
            if value is not None and key not in entry:
                entry[key] = value

    def communicator(self, message: str, host: str | None, pid: int | None, dev: int | None, number: int) -> None:
        init = INIT.search(message)
        if init is not None and INIT_END.search(message, init.end()) is None:
            self.skip(number)  # an init line cut short: its commId may be what is missing
            return
        comm_line = COMM.search(message) if init is None else None
        match = init or comm_line
        if match is None:
            return
        rank, nranks = int(match.group("rank")), int(match.group("nranks"))
        if rank >= nranks or nranks > MAX_NCCL_RANK:
            return
        pointer = match.group("ptr").lower()
        key = self.pointer_comm.get((host, pid, pointer))
        found_id = COMM_ID.search(message, match.end()) if init is not None else None
        if found_id is not None:
            comm_id = found_id.group(1).lower()
            if key is not None and key != comm_id and key.endswith(SIZE_KEY):
                self.aliases.setdefault(key, set()).add(comm_id)
            key = comm_id
        if key is None:
            key = f"{nranks}{SIZE_KEY}"
        self.pointer_comm[(host, pid, pointer)] = key
        known = self.process_comms.setdefault((host, pid), [])
        if (key, rank, nranks) not in known:
            known.append((key, rank, nranks))
            self.joins += 1
        old_size = self.comm_sizes.get(key, (None, None))
        nnodes = int(comm_line.group("nnodes")) if comm_line is not None else old_size[1]
        self.comm_sizes[key] = (nranks, nnodes)
        if init is not None:
            found_bus = BUS_ID.search(message, init.end())
            bus = found_bus.group(1) if found_bus is not None else None
            self.learn(key, rank, host=host, pid=pid, cuda_dev=int(init.group("cuda")),
                       nvml_dev=int(init.group("nvml")) if init.group("nvml") else None,
                       bus_id=bus.lower() if bus else None)
        else:
            self.learn(key, rank, host=host, pid=pid, cuda_dev=dev)

    def connection(self, message: str, host: str | None, pid: int | None, dev: int | None, number: int) -> bool:
        parsed = self.parsed.get(message)
        if parsed is None:
            parsed = parse_connection(message)
            if len(self.parsed) < MAX_PARSED_LINES:
                self.parsed[message] = parsed
        if parsed:
            self.add_connection(parsed, host, pid, dev, number)
            return True
        collnet = COLLNET.match(message)
        if collnet is not None and transport_class(collnet.group("detail")) is not None:
            rank = int(collnet.group("rank"))
            comm = self.comm_of(host, pid, rank, rank)
            self.learn(comm, rank, host=host, pid=pid, cuda_dev=dev)
            self.add_edge(comm, rank, None, int(collnet.group("ch")), collnet.group("side"), collnet.group("detail"), number)
            return True
        return False

    def add_connection(self, parsed: Connection, host: str | None, pid: int | None, dev: int | None,
                       number: int) -> None:
        """A connection line of (host, pid) on `dev`, line `number`, read as `parsed`."""
        src, dst, channel, side, detail, src_fact, dst_fact = parsed
        self.add_link(self.link_of((src, dst, side, detail, src_fact, dst_fact), host, pid, dev), channel, number)

    def link_of(self, ends: Ends, host: str | None, pid: int | None, dev: int | None) -> Link:
        """What a connection line of (host, pid) on `dev` that states `ends` says on any channel (the communicator
        is the one its printer is in now: the same until a process joins another)."""
        src, dst, side, detail, src_fact, dst_fact = ends
        printer, other = (dst, src) if side == "receive" else (src, dst)
        comm = self.comm_of(host, pid, printer, src if src > dst else dst)
        return comm, src, dst, side, detail, (comm, printer, other, host, pid, dev, src_fact, dst_fact)

    def add_link(self, link: Link, channel: int, number: int) -> bool:
        """The connection `link` states on `channel`, first seen on line `number`; what it tells of its ranks,
        unless told before (each fact is kept the first time only). False when it was new and there was no room."""
        comm, src, dst, side, detail, told = link
        key = (comm, src, dst, channel, side, detail)
        if key in self.edges:
            return True
        if len(self.edges) >= MAX_EDGES:
            self.edges_dropped += 1
            return False
        self.edges[key] = number
        if told not in self.told:
            self.tell(link)
        return True

    def tell(self, link: Link) -> None:
        """What `link`'s line says of its ranks: where the printer runs, what the brackets say."""
        comm, src, dst, _, _, told = link
        _, printer, other, host, pid, dev, src_fact, dst_fact = told
        if len(self.told) >= MAX_PARSED_LINES:
            self.told.clear()
        self.told.add(told)
        ranks = self.ranks
        if (comm, other) not in ranks:
            ranks[(comm, other)] = {}  # the other end is a rank too, wherever it logs
        entry = ranks.get((comm, printer))
        if entry is None:
            entry = ranks[(comm, printer)] = {}
        if host is not None and "host" not in entry:
            entry["host"] = host
        if pid is not None and "pid" not in entry:
            entry["pid"] = pid
        if dev is not None and "cuda_dev" not in entry:
            entry["cuda_dev"] = dev
        if src_fact is not None and src_fact[0] not in (entry := ranks[(comm, src)]):
            entry[src_fact[0]] = src_fact[1]
        if dst_fact is not None and dst_fact[0] not in (entry := ranks[(comm, dst)]):
            entry[dst_fact[0]] = dst_fact[1]

    def add_edge(self, comm: str | None, src: int, dst: int | None, channel: int, side: str | None,
                 detail: str, number: int) -> None:
        key = (comm, src, dst, channel, side, detail.rstrip())
        if key in self.edges:
            return
        if len(self.edges) >= MAX_EDGES:
            self.edges_dropped += 1
            return
        self.edges[key] = number

    def ring_order(self, message: str, host: str | None, pid: int | None) -> bool:
        if "->" in message:
            return False
        match = RING_ORDER.match(message)
        if match is None:
            return False
        order = tuple(int(word) for word in match.group("order").split())
        if len(set(order)) != len(order) or max(order) > MAX_NCCL_RANK:
            return False
        comm = self.comm_of(host, pid, 0, max(order))
        known = self.process_comms.get((host, pid))
        if comm is None and known:
            fitting = [key for key, _, nranks in known if nranks == len(order)]
            comm = fitting[-1] if fitting else None
        self.rings.setdefault((comm, int(match.group("ch"))), order)
        return True

    def tree(self, message: str, host: str | None, pid: int | None, dev: int | None, number: int) -> None:
        if TREES.match(message) is None:
            self.skip(number)
            return
        items = TREE_ITEM.findall(message)
        rank = int(items[0][4])
        comm = self.comm_of(host, pid, rank, rank)
        self.learn(comm, rank, host=host, pid=pid, cuda_dev=dev)
        for channel, child_a, child_b, child_c, _, parent in items:
            self.trees.setdefault((comm, rank, int(channel)), tree_links(child_a, child_b, child_c, parent))

    def result(self) -> NcclLog:
        """The log as frozen values (:mod:`topo.formats.nccl_log_frozen`)."""
        return frozen_log(self)
