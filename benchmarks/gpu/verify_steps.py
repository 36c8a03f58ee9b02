"""The steps of `benchmarks/gpu/verify`, each a function that runs commands and adds rows to the summary.

A step never raises: a command that fails, times out or prints something unreadable becomes a FAIL
row naming what happened, and the next step runs. linkscope is always run as an installed package,
from a folder outside the working tree, with textual made unimportable (the GPU machines have no
textual, and the commands run here must not need it).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import select
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driver_view import DriverMatrix, DriverView, parse_nvlink_status, parse_query_xml, parse_topo_matrix

RECORDING = "nvml-recording.jsonl"
HARNESS_MIN_RATIO = 0.95
"""linkscope's copy figures may be at most 5% below a plain torch loop timing the same copies."""
COUNTER_RATIO_BAND = (0.5, 1.6)
"""NVML's PCIe rate during a known load, over the load's own rate: 'about the same' (NVML samples 20 ms windows)."""
LINKSCOPE_WITHOUT_TEXTUAL = (
    "import sys; sys.modules['textual'] = None; from linkscope.cli import main; sys.exit(main(sys.argv[1:]))"
)


@dataclass
class Row:
    """One line of the summary table."""

    check: str
    linkscope: str
    reference: str
    verdict: str
    """pass, FAIL, warn, info or skipped."""
    step: str = ""


@dataclass
class Ran:
    """A finished command: exit status (None when it timed out), output, seconds."""

    code: int | None
    out: str
    err: str
    seconds: float


@dataclass(frozen=True)
class Step:
    name: str
    run: Callable[[Kit], None]
    needs: str = ""
    """`gpu` (CUDA through torch), `nvidia-smi`, `torch` or `` (nothing)."""


@dataclass
class Kit:
    """What the steps share: where things go, what the machine has, and the rows so far."""

    repo: Path
    work: Path
    raw: Path
    deadline_s: float
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    site: Path | None = None
    """Folder linkscope was installed into (None: run from the working tree)."""
    has: dict[str, str] = field(default_factory=dict)
    """What the machine has, by need: `gpu`, `nvidia-smi`, `torch` -> why not ('' when present)."""
    driver: DriverView | None = None
    matrix: DriverMatrix | None = None
    nvlink: dict[int, dict[int, bool]] | None = None
    probe: dict[str, Any] | None = None
    cuda_bus_ids: list[str] = field(default_factory=list)
    """PCI bus id of each CUDA device, in torch's numbering."""
    step_name: str = ""

    @property
    def log_path(self) -> Path:
        return self.work / "verify.log"

    def log(self, line: str) -> None:
        with open(self.log_path, "a", encoding="utf-8") as handle:
            handle.write(f"{time.strftime('%H:%M:%S')} {line}\n")
        print(line, file=sys.stderr, flush=True)

    def add(self, check: str, linkscope: Any, reference: Any, verdict: str) -> None:
        self.rows.append(Row(check, _cell(linkscope), _cell(reference), verdict, self.step_name))

    def compare(self, check: str, ours: Any, theirs: Any) -> None:
        """A pass row when the two agree, FAIL when they differ, info when the reference does not say."""
        if theirs is None:
            self.add(check, ours, "not stated", "info")
        else:
            self.add(check, ours, theirs, "pass" if ours == theirs else "FAIL")

    def left_s(self) -> float:
        return self.deadline_s - time.monotonic()

    def run_step(self, step: Step) -> None:
        self.step_name = step.name
        missing = self.has.get(step.needs, "") if step.needs else ""
        if step.needs and step.needs not in self.has:
            missing = f"{step.needs} not checked (the environment step did not run)"
        if missing:
            self.add(step.name, "-", "-", "skipped")
            self.notes.append(f"{step.name}: skipped: {missing}")
            self.log(f"== {step.name}: skipped ({missing})")
            return
        if self.left_s() < 5:
            self.add(step.name, "-", "-", "skipped")
            self.notes.append(f"{step.name}: skipped: the run's time budget was spent")
            return
        started = time.monotonic()
        self.log(f"== {step.name}")
        try:
            step.run(self)
        except Exception as exc:  # a bug in a step is a failed check, never the end of the run
            self.add(f"{step.name} ran", f"{type(exc).__name__}: {exc}", "-", "FAIL")
        self.log(f"== {step.name} done in {time.monotonic() - started:.1f} s")

    def command(self, name: str, argv: list[str], timeout_s: float = 60.0, env: dict[str, str] | None = None,
                cwd: Path | None = None) -> Ran:
        """Run `argv`, save its output as raw/NAME.out and .err, and return it; a timeout gives code None."""
        timeout_s = max(1.0, min(timeout_s, self.left_s()))
        environment = {**os.environ, **(env or {})}
        started = time.monotonic()
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=environment,
                                  cwd=str(cwd or self.work), errors="replace", stdin=subprocess.DEVNULL)
            ran = Ran(done.returncode, done.stdout, done.stderr, time.monotonic() - started)
        except subprocess.TimeoutExpired as exc:
            ran = Ran(None, _text(exc.stdout), _text(exc.stderr) + f"\n(timed out after {timeout_s:.0f} s)",
                      time.monotonic() - started)
        except OSError as exc:
            ran = Ran(127, "", f"{argv[0]}: {exc.strerror}", time.monotonic() - started)
        (self.raw / f"{name}.out").write_text(ran.out, encoding="utf-8")
        if ran.err.strip():
            (self.raw / f"{name}.err").write_text(ran.err, encoding="utf-8")
        self.log(f"   {name}: exit {ran.code} in {ran.seconds:.1f} s: {' '.join(argv)[:200]}")
        return ran

    def linkscope(self, name: str, args: list[str], timeout_s: float = 60.0, record: bool = False) -> Ran:
        """Run the installed linkscope CLI (textual unimportable); `record` appends its NVML calls to the recording."""
        paths = [str(self.site)] if self.site is not None else [str(self.repo)]
        env = {"PYTHONPATH": os.pathsep.join(paths), "COLUMNS": "160", "NO_COLOR": "1"}
        if record:
            env["LINKSCOPE_NVML_RECORD"] = str(self.raw / RECORDING)
        return self.command(name, [sys.executable, "-c", LINKSCOPE_WITHOUT_TEXTUAL, *args], timeout_s, env)

    def kit_script(self, name: str, script: str, args: list[str], timeout_s: float = 60.0,
                   record: bool = False, env: dict[str, str] | None = None) -> Ran:
        """Run one of the kit's own scripts (benchmarks/gpu/SCRIPT) with the installed linkscope importable."""
        paths = [str(self.site) if self.site is not None else str(self.repo), str(Path(__file__).parent)]
        env = {**(env or {}), "PYTHONPATH": os.pathsep.join(paths)}
        if record:
            env["LINKSCOPE_NVML_RECORD"] = str(self.raw / RECORDING)
        return self.command(name, [sys.executable, str(Path(__file__).parent / script), *args], timeout_s, env)

    def write_summary(self, outdir: Path) -> None:
        lines = ["# linkscope verification run", "",
                 f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {platform.node()}, {platform.platform()}", "",
                 "| check | linkscope | driver/reference | verdict |", "|---|---|---|---|"]
        for row in self.rows:
            cells = [row.check, row.linkscope, row.reference, row.verdict]
            lines.append("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |")
        lines += ["", "## Notes", ""] + [f"- {note}" for note in self.notes]
        (outdir / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
        (outdir / "summary.json").write_text(json.dumps({
            "host": platform.node(), "platform": platform.platform(), "python": sys.version.split()[0],
            "rows": [dataclasses.asdict(row) for row in self.rows], "notes": self.notes,
        }, indent=1) + "\n", encoding="utf-8")


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return str(value).replace("\n", " ")[:160]


def _json(ran: Ran) -> Any | None:
    """The command's JSON output; else its last line that is a JSON object (NCCL's INFO lines share stdout)."""
    try:
        return json.loads(ran.out)
    except ValueError:
        pass
    for line in reversed(ran.out.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def _exit_row(kit: Kit, check: str, ran: Ran, allowed: tuple[int, ...] = (0,)) -> bool:
    """A row for a command's exit status; True when it is one of `allowed`."""
    ok = ran.code in allowed
    said = "timed out" if ran.code is None else f"exit {ran.code}"
    detail = "" if ok else ": " + (ran.err.strip().splitlines() or ["(no message)"])[-1][:120]
    kit.add(check, said + detail, "exit " + "/".join(map(str, allowed)), "pass" if ok else "FAIL")
    return ok


# --- the steps ----------------------------------------------------------------------------------

_ENVIRONMENT_PROBE = r"""
import json, importlib.util
found = {"textual": importlib.util.find_spec("textual") is not None}
try:
    import pynvml
    from importlib.metadata import version
    found["nvidia-ml-py"] = version("nvidia-ml-py")
except Exception as exc:
    found["nvidia-ml-py"] = None
try:
    import torch
    found["torch"] = torch.__version__
    found["torch_cuda"] = torch.version.cuda
    found["cuda_available"] = bool(torch.cuda.is_available())
    found["cuda_devices"] = torch.cuda.device_count() if found["cuda_available"] else 0
    found["gpu_names"] = [torch.cuda.get_device_name(i) for i in range(found["cuda_devices"])]
    found["cuda_bus_ids"] = []
    for i in range(found["cuda_devices"]):
        props = torch.cuda.get_device_properties(i)
        found["cuda_bus_ids"].append("%08x:%02x:%02x.0" % (getattr(props, "pci_domain_id", 0), props.pci_bus_id,
                                                            props.pci_device_id))
    try:
        found["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if found["cuda_available"] else None
    except Exception as exc:
        found["nccl"] = f"unknown ({type(exc).__name__})"
except ImportError:
    found["torch"] = None
print(json.dumps(found))
"""


def step_environment(kit: Kit) -> None:
    ran = kit.command("environment", [sys.executable, "-c", _ENVIRONMENT_PROBE], 90)
    found = _json(ran) or {}
    kit.add("python", platform.python_version(), sys.executable, "info")
    kit.add("torch (CUDA, NCCL)", f"{found.get('torch')} (CUDA {found.get('torch_cuda')}, NCCL {found.get('nccl')})",
            f"{found.get('cuda_devices', 0)} CUDA device(s): {', '.join(found.get('gpu_names') or []) or 'none'}", "info")
    kit.add("nvidia-ml-py", found.get("nvidia-ml-py"), "-", "info")
    kit.add("textual importable", found.get("textual"), "the CLI runs here without it", "info")
    kit.cuda_bus_ids = list(found.get("cuda_bus_ids") or [])
    (kit.raw / "sysfs.json").write_text(json.dumps(_sysfs_facts(), indent=1), encoding="utf-8")
    smi = shutil.which("nvidia-smi")
    kit.has["nvidia-smi"] = "" if smi else "nvidia-smi is not on PATH"
    kit.has["torch"] = "" if found.get("torch") else "torch is not installed"
    if found.get("cuda_available"):
        kit.has["gpu"] = ""
    elif not found.get("torch"):
        kit.has["gpu"] = "torch is not installed (the GPU steps drive CUDA through torch)"
    else:
        kit.has["gpu"] = "no CUDA GPU is visible to torch"
    if smi:
        version = kit.command("nvidia-smi-version", [smi, "--version"], 30)
        kit.add("nvidia-smi --version", (version.out.strip().splitlines() or ["?"])[0], "-", "info")


SYSFS_PCI = Path("/sys/bus/pci/devices")
SYSFS_NODES = Path("/sys/devices/system/node")
PCI_ATTRIBUTES = ("vendor", "device", "class", "numa_node", "local_cpulist", "current_link_speed", "current_link_width",
                  "max_link_speed", "max_link_width")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _sysfs_facts() -> dict[str, Any]:
    """What the probe reads from sysfs about NVIDIA devices, bridges above them and NUMA nodes, as the
    kernel states it (so a replay of the probe can be given the same machine)."""
    devices: dict[str, Any] = {}
    for device in sorted(SYSFS_PCI.glob("*")) if SYSFS_PCI.exists() else ():
        vendor = _read(device / "vendor")
        pci_class = _read(device / "class") or ""
        if vendor == "0x10de" or pci_class.startswith(("0x0604", "0x0207", "0x0200")):
            facts = {name: _read(device / name) for name in PCI_ATTRIBUTES}
            facts["path"] = str(device.resolve())
            devices[device.name] = facts
    nodes = {node.name: {"cpulist": _read(node / "cpulist"), "distance": _read(node / "distance")}
             for node in sorted(SYSFS_NODES.glob("node[0-9]*"))} if SYSFS_NODES.exists() else {}
    return {"pci": devices, "numa_nodes": nodes, "cpus": os.cpu_count()}


def step_install(kit: Kit) -> None:
    """pip install --no-deps --no-build-isolation --no-index from a copy of the tree, into a folder of its own."""
    recent = "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 68)"  # pyproject's floor
    if subprocess.run([sys.executable, "-c", recent], capture_output=True).returncode != 0:
        kit.add("install from the working tree", "setuptools missing or older than 68", "-", "skipped")
        kit.notes.append("install: setuptools 68 or newer is not installed here (pip --no-build-isolation needs it); "
                         "linkscope runs as this Python has it installed (pip install -e . in the working tree) instead")
        return
    source = kit.work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(kit.repo / name, source / name)
    for name in ("linkscope", "topo", "probes", "tui"):
        if (kit.repo / name).exists():
            shutil.copytree(kit.repo / name, source / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    site = kit.work / "site"
    ran = kit.command("install", [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                                  "--no-index", "--quiet", "--disable-pip-version-check", "--target", str(site),
                                  str(source)], 240)
    if _exit_row(kit, "pip install --no-deps --no-build-isolation --no-index", ran):
        kit.site = site
        modules = sorted(path.name for path in (site / "linkscope").iterdir() if path.is_dir())
        wanted = {"topo", "probes", "tui", "commands"}
        kit.add("installed packages", ", ".join(sorted(wanted & set(modules))), ", ".join(sorted(wanted)),
                "pass" if wanted <= set(modules) else "FAIL")
        kit.add("install time (s)", ran.seconds, "-", "info")
    else:
        kit.notes.append("install failed: linkscope runs as this Python has it installed instead")


def step_driver(kit: Kit) -> None:
    """The driver's own view: what nvidia-smi prints, every form the kit or a later reader may want."""
    smi = shutil.which("nvidia-smi") or "nvidia-smi"
    commands = {
        "nvidia-smi-q-x": ["-q", "-x"],
        "nvidia-smi-q": ["-q"],
        "nvidia-smi-topo-m": ["topo", "-m"],
        "nvidia-smi-topo-p2p-r": ["topo", "-p2p", "r"],
        "nvidia-smi-topo-p2p-w": ["topo", "-p2p", "w"],
        "nvidia-smi-topo-p2p-n": ["topo", "-p2p", "n"],
        "nvidia-smi-topo-p2p-a": ["topo", "-p2p", "a"],
        "nvidia-smi-nvlink-s": ["nvlink", "-s"],
        "nvidia-smi-nvlink-e": ["nvlink", "-e"],
        "nvidia-smi-q-clock": ["-q", "-d", "CLOCK"],
        "nvidia-smi-L": ["-L"],
    }
    outputs = {name: kit.command(name, [smi, *args], 60) for name, args in commands.items()}
    failed = [name for name, ran in outputs.items() if ran.code != 0]
    kit.add("nvidia-smi outputs recorded", f"{len(commands) - len(failed)} of {len(commands)}",
            "failed: " + ", ".join(failed) if failed else "all", "info")
    try:
        kit.driver = parse_query_xml(outputs["nvidia-smi-q-x"].out)
    except Exception as exc:
        kit.add("nvidia-smi -q -x readable", f"{type(exc).__name__}: {exc}", "-", "FAIL")
    kit.matrix = parse_topo_matrix(outputs["nvidia-smi-topo-m"].out)
    kit.nvlink = parse_nvlink_status(outputs["nvidia-smi-nvlink-s"].out)
    if outputs["nvidia-smi-nvlink-s"].code == 0 and not outputs["nvidia-smi-nvlink-s"].out.strip() and kit.driver:
        kit.nvlink = {index: {} for index in range(len(kit.driver.gpus))}  # it prints nothing for GPUs without NVLink
    if kit.driver is not None:
        kit.add("driver (nvidia-smi)", kit.driver.driver_version, f"CUDA {kit.driver.cuda_version}", "info")


def _nvml_timings(kit: Kit, argv_word: str) -> tuple[float | None, float | None, int]:
    """nvmlInit ms, the slowest first call on a GPU handle ms, and the call count of the first recorded
    session whose command line starts with `argv_word`."""
    path = kit.raw / RECORDING
    if not path.exists():
        return None, None, 0
    sessions: dict[str, list[dict[str, Any]]] = {}
    wanted: str | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if "format" in item and wanted is None and (item.get("argv") or [""])[0] == argv_word:
            wanted = item["session"]
        sessions.setdefault(item.get("session"), []).append(item)
    calls = [item for item in sessions.get(wanted, []) if "function" in item]
    init = next((item.get("ms") for item in calls if item["function"] == "nvmlInit"), None)
    firsts: dict[str, float] = {}
    for item in calls:
        handle = next((arg["handle"] for arg in item.get("args", []) if isinstance(arg, dict) and "handle" in arg), None)
        if handle is not None and handle not in firsts:
            firsts[handle] = float(item.get("ms", 0.0))
    return init, max(firsts.values()) if firsts else None, len(calls)


def step_probe(kit: Kit) -> None:
    ran = kit.linkscope("probe", ["probe", "--json"], 90, record=True)
    if not _exit_row(kit, "linkscope probe --json", ran):
        return
    data = _json(ran)
    if not isinstance(data, dict) or "snapshot" not in data:
        kit.add("probe JSON", "unreadable", "-", "FAIL")
        return
    kit.probe = data
    (kit.raw / "probe-snapshot.json").write_text(json.dumps(data["snapshot"], indent=1), encoding="utf-8")
    init_ms, first_ms, calls = _nvml_timings(kit, "probe")
    kit.add("probe wall time (s)", ran.seconds, "goal <= 0.5 s after start-up", "info")
    kit.add("nvmlInit (ms) / slowest first GPU call (ms)", f"{_cell(init_ms)} / {_cell(first_ms)}",
            f"{calls} NVML calls recorded", "info" if calls else "warn")
    gaps = data["snapshot"].get("gaps") or []
    kit.add("probe gaps", len(gaps), "; ".join(f"{gap.get('subject')}: {gap.get('reason')}" for gap in gaps[:4]) or "-",
            "info")
    facts = kit.kit_script("nvml-facts", "nvml_facts.py", [], 60, record=True)
    kit.add("NVML facts for the replay test", "written" if facts.code == 0 else f"exit {facts.code}", "-",
            "info" if facts.code == 0 else "warn")
    if kit.has.get("nvidia-smi") == "":
        _probe_against_driver(kit, data)


def _bus(value: Any) -> str | None:
    """A PCI bus id compared without case and with an 8-digit domain (`0000:18:00.0` = `00000000:18:00.0`)."""
    if not value:
        return None
    text = str(value).strip().upper()
    parts = text.split(":")
    if len(parts) == 2:
        parts = ["0", *parts]
    try:
        return f"{int(parts[0], 16):08X}:{parts[1]}:{parts[2]}" if len(parts) == 3 else text
    except ValueError:
        return text


def _probe_against_driver(kit: Kit, data: dict[str, Any]) -> None:
    hosts = data["snapshot"].get("hosts") or [{}]
    gpus = hosts[0].get("gpus", [])
    versions = hosts[0].get("versions", {})
    driver = kit.driver
    if driver is None:
        kit.add("probe against nvidia-smi -q", "-", "nvidia-smi -q -x not readable", "skipped")
        return
    kit.compare("driver version", versions.get("driver"), driver.driver_version)
    kit.compare("GPU count", len(gpus), len(driver.gpus))
    by_bus = {_bus(gpu.bus_id): gpu for gpu in driver.gpus}
    for gpu in gpus:
        label = f"GPU {gpu.get('index')}"
        theirs = by_bus.get(_bus(gpu.get("pci_bus_id")))
        if theirs is None:
            kit.add(f"{label} bus id", gpu.get("pci_bus_id"), "not among nvidia-smi's GPUs", "FAIL")
            continue
        kit.compare(f"{label} bus id", _bus(gpu.get("pci_bus_id")), _bus(theirs.bus_id))
        kit.compare(f"{label} UUID", gpu.get("uuid"), theirs.uuid)
        kit.compare(f"{label} name", gpu.get("name"), theirs.name)
        memory = gpu.get("memory_total_bytes")
        kit.compare(f"{label} memory (MiB)", memory // 2**20 if memory else None, theirs.memory_total_mib)
        kit.compare(f"{label} PCIe gen current", gpu.get("pcie_gen_current"), theirs.pcie_gen_current)
        kit.compare(f"{label} PCIe gen max", gpu.get("pcie_gen_max"), theirs.pcie_gen_max)
        if theirs.pcie_gen_device_max is not None or theirs.pcie_gen_host_max is not None:
            kit.add(f"{label} PCIe gen max: device / host (nvidia-smi)", gpu.get("pcie_gen_max"),
                    f"{theirs.pcie_gen_device_max} / {theirs.pcie_gen_host_max}", "info")
        kit.compare(f"{label} PCIe width current", gpu.get("pcie_width_current"), theirs.pcie_width_current)
        kit.compare(f"{label} PCIe width max", gpu.get("pcie_width_max"), theirs.pcie_width_max)
        if theirs.numa_node is not None:
            kit.compare(f"{label} NUMA node", gpu.get("numa_node"), theirs.numa_node)
        matrix_numa = (kit.matrix.numa_affinity.get(f"GPU{gpu.get('index')}") if kit.matrix else None)
        if matrix_numa is not None:
            kit.compare(f"{label} NUMA affinity (topo -m)", gpu.get("numa_affinity") or "N/A", matrix_numa)
        links = (kit.nvlink or {}).get(int(gpu.get("index", -1)))
        if links is not None:
            kit.compare(f"{label} NVLinks active", gpu.get("nvlink_active") or 0, sum(links.values()))
    for row in (data.get("identity") or {}).get("rows", []):
        cuda_index = row.get("cuda_index")
        if cuda_index is None or cuda_index >= len(kit.cuda_bus_ids):
            continue
        kit.compare(f"identity: NVML {row.get('nvml_index')} is cuda:{cuda_index} (bus id)", _bus(row.get("pci_bus_id")),
                    _bus(kit.cuda_bus_ids[cuda_index]))
    _matrix_against_driver(kit)


def _matrix_against_driver(kit: Kit) -> None:
    if kit.matrix is None or not kit.matrix.rows:
        kit.add("link matrix vs nvidia-smi topo -m", "-", "topo -m not readable", "skipped")
        return
    shown = kit.linkscope("show-probe-json", ["show", str(kit.raw / "probe-snapshot.json"), "--json"], 60)
    data = _json(shown)
    if not isinstance(data, dict):
        kit.add("linkscope show --json on the probe", f"exit {shown.code}", "-", "FAIL")
        return
    gpu_columns = [column for column in kit.matrix.columns if column.startswith("GPU")]
    mismatches, compared = [], 0
    for a, row in enumerate(data.get("matrix", [])):
        for b, token in enumerate(row):
            theirs = kit.matrix.rows.get(f"GPU{a}", {}).get(f"GPU{b}")
            if theirs is None:
                continue
            compared += 1
            if token != theirs:
                mismatches.append(f"GPU{a}-GPU{b} {token} vs {theirs}")
    nic_names = {name: label for label, name in kit.matrix.nic_names.items()}
    for a, row in enumerate(data.get("gpu_nic", [])):
        for nic, token in zip(data.get("nics", []), row, strict=False):
            column = nic_names.get(nic, nic)
            theirs = kit.matrix.rows.get(f"GPU{a}", {}).get(column)
            if theirs is None:
                continue
            compared += 1
            if token != theirs:
                mismatches.append(f"GPU{a}-{nic} {token} vs {theirs}")
    kit.add("link matrix tokens vs topo -m", f"{compared - len(mismatches)} of {compared} agree",
            "; ".join(mismatches[:4]) or f"{len(gpu_columns)} GPU column(s)",
            "FAIL" if mismatches else ("pass" if compared else "info"))


def step_show_doctor(kit: Kit) -> None:
    snapshot = kit.raw / "probe-snapshot.json"
    if snapshot.exists():
        _exit_row(kit, "linkscope show (the probe's snapshot)", kit.linkscope("show", ["show", str(snapshot)], 60))
        doctor = kit.linkscope("doctor-snapshot", ["doctor", str(snapshot), "--json"], 60)
        _exit_row(kit, "linkscope doctor (the probe's snapshot)", doctor, (0, 1))
        _findings_row(kit, "doctor findings (snapshot)", doctor)
    here = kit.linkscope("doctor-here", ["doctor", "--json"], 90, record=True)
    _exit_row(kit, "linkscope doctor (this machine)", here, (0, 1))
    _findings_row(kit, "doctor findings (this machine)", here)


def _findings_row(kit: Kit, check: str, ran: Ran) -> None:
    data = _json(ran)
    findings = data.get("findings", []) if isinstance(data, dict) else []
    text = "; ".join(f"{item.get('severity')} {item.get('code')}" for item in findings[:5]) or "none"
    kit.add(check, len(findings), text, "info")


def step_bench_copies(kit: Kit) -> None:
    size, copies, samples = "256M", "4", "5"
    ran = kit.linkscope("bench-p2p", ["bench", "p2p", "--local", "--pageable", "--bytes", size, "--copies", copies,
                                      "--samples", samples, "--json", "--force"], 180, record=True)
    _exit_row(kit, "linkscope bench p2p --local --pageable", ran, (0, 1))
    ours = _json(ran) or {}
    reference_run = kit.kit_script("reference-copies", "reference_copies.py",
                                   ["--bytes", size, "--copies", copies, "--samples", samples], 120)
    reference = (_json(reference_run) or {}).get("gbps", {})
    if not reference:
        kit.add("plain torch loop (reference)", f"exit {reference_run.code}", "-", "FAIL")
    judge_copies(kit, ours, reference)


def judge_copies(kit: Kit, ours: dict[str, Any], reference: dict[str, float]) -> None:
    """Rows for `bench p2p --local --pageable --json` (ours) against the plain loop's GB/s per kind."""
    measured: dict[str, float] = {}
    expected: dict[str, Any] = {}
    # the GPU's own NUMA node where the bench knew it, else the first node it copied from
    for row in sorted(ours.get("host", []), key=lambda row: not row.get("local")):
        if row.get("gpu") == 0:
            measured.setdefault(f"pinned_{row['direction']}", row["gbps"])
            expected.setdefault(f"pinned_{row['direction']}", (row.get("expected_gbps"), row.get("verdict")))
    for row in ours.get("pageable", []):
        if row.get("gpu") == 0:
            measured[f"pageable_{row['direction']}"] = row["gbps"]
    for row in ours.get("local_copies", []):
        if row.get("gpu") == 0:
            measured["local_d2d"] = row["gbps"]
    for kind in ("pinned_h2d", "pinned_d2h", "pageable_h2d", "pageable_d2h", "local_d2d"):
        mine, theirs = measured.get(kind), reference.get(kind)
        if mine is None or theirs is None:
            kit.add(f"{kind} GB/s (GPU 0)", mine, theirs, "FAIL")
            continue
        ratio = mine / theirs
        kit.add(f"{kind} GB/s (GPU 0) vs plain torch loop", f"{mine:.1f}", f"{theirs:.1f} (ratio {ratio:.3f})",
                "pass" if ratio >= HARNESS_MIN_RATIO else "FAIL")
    for kind, (figure, verdict) in expected.items():
        kit.add(f"{kind} against the PCIe link's expected figure", f"{measured[kind]:.1f} ({verdict})",
                f"{_cell(figure)} GB/s expected", "warn" if verdict in ("slow", "far below") else "info")
    unverified = [row for key in ("host", "pageable", "local_copies") for row in ours.get(key, [])
                  if row.get("verified") is False]
    kit.add("copied data verified", "all" if not unverified else f"{len(unverified)} corrupted", "-",
            "pass" if ours and not unverified else "FAIL")


def step_bench_collectives(kit: Kit) -> None:
    if kit.has.get("gpu") == "":
        args = ["--backend", "nccl", "--nproc", "1", "--min-bytes", "1M", "--max-bytes", "256M", "--factor", "4",
                "--force"]
    else:
        args = ["--backend", "gloo", "--nproc", "1", "--min-bytes", "1K", "--max-bytes", "64K", "--factor", "8",
                "--ops", "all_reduce,all_gather"]
    ran = kit.linkscope("bench-collectives", ["bench", "collectives", *args, "--json"], 180, record=True)
    _exit_row(kit, f"linkscope bench collectives {' '.join(args[:4])}", ran, (0, 1))
    judge_collectives(kit, _json(ran) or {})


def judge_collectives(kit: Kit, data: dict[str, Any]) -> None:
    """Rows for `bench collectives --nproc 1 --json`: every row correct, nothing judged at one rank, and said."""
    rows = data.get("rows", [])
    wrong = sum(int(row.get("wrong") or 0) for row in rows)
    kit.add("collective rows (all correct)", f"{len(rows)} rows, {wrong} wrong", "world size 1",
            "pass" if rows and not wrong else "FAIL")
    judged = [row for row in rows if row.get("verdict") is not None]
    said = any(note.startswith("one rank: nothing crosses a link") for note in data.get("notes", []))
    kit.add("world size 1: nothing judged, and said", f"{len(judged)} rows judged; note {'given' if said else 'missing'}",
            "no link to judge", "pass" if not judged and said else "FAIL")
    largest = max(rows, key=lambda row: row.get("bytes", 0), default=None)
    if largest is not None:
        kit.add(f"largest {largest.get('op')} algbw (GB/s)", largest.get("algbw_gbps"),
                f"{largest.get('bytes')} B in {largest.get('time_us')} us", "info")
    notes = data.get("notes", [])
    kit.add("bench collectives notes", len(notes), "; ".join(notes)[:160] or "-", "info")


def step_record(kit: Kit) -> None:
    """`linkscope record` while copy_load.py moves known volumes: do the PCIe counters see them?"""
    load_env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    load = subprocess.Popen([sys.executable, str(Path(__file__).parent / "copy_load.py"), "--seconds", "3.5",
                             "--delay", "1.5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=load_env,
                            cwd=str(kit.work))
    assert load.stdout is not None
    ready, _, _ = select.select([load.stdout], [], [], max(1.0, min(90.0, kit.left_s())))
    first = load.stdout.readline() if ready else ""
    if first.strip() != "ready":
        load.kill()
        out, err = load.communicate()
        (kit.raw / "copy-load.err").write_text(first + out + err, encoding="utf-8")
        kit.add("synthetic PCIe load started", first.strip()[:80] or "no answer", "ready", "FAIL")
        return
    rec_path = kit.raw / "record.json"
    ran = kit.linkscope("record", ["record", "-o", str(rec_path), "--seconds", "10", "--interval", "0.5"], 60,
                        record=True)
    try:
        out, err = load.communicate(timeout=max(5.0, min(30.0, kit.left_s())))
    except subprocess.TimeoutExpired:
        load.kill()
        out, err = load.communicate()
    (kit.raw / "copy-load.out").write_text(out, encoding="utf-8")
    if err.strip():
        (kit.raw / "copy-load.err").write_text(err, encoding="utf-8")
    if not _exit_row(kit, "linkscope record --seconds 10", ran):
        return
    try:
        phases = json.loads(out)["phases"]
        recording = json.loads(rec_path.read_text(encoding="utf-8"))["recording"]
    except (ValueError, KeyError, OSError, TypeError) as exc:
        kit.add("record vs known load", f"unreadable: {type(exc).__name__}", f"load exit {load.returncode}", "FAIL")
        return
    judge_record(kit, phases, recording)


def judge_record(kit: Kit, phases: list[dict[str, Any]], recording: dict[str, Any]) -> None:
    """Rows for a recording made during copy_load.py's phases: GPU 0's PCIe counters against the load's rates."""
    started = _unix(recording.get("started"))
    samples = recording.get("samples", [])
    for phase in phases:
        window = (phase["start_unix_s"] + 0.3, phase["end_unix_s"] - 0.1)
        inside = [sample for sample in samples if started is not None and window[0] <= started + sample["t_s"] <= window[1]]
        gpu0 = [next((gpu for gpu in sample["gpus"] if gpu["index"] == 0), {}) for sample in inside]
        rx = [gpu.get("pcie_rx_gbps") for gpu in gpu0 if gpu.get("pcie_rx_gbps") is not None]
        tx = [gpu.get("pcie_tx_gbps") for gpu in gpu0 if gpu.get("pcie_tx_gbps") is not None]
        if not rx and not tx:
            kit.add(f"PCIe counters during {phase['direction']} load", "no readings", f"{phase['gbps']:.1f} GB/s",
                    "FAIL" if inside else "warn")
            continue
        toward = statistics.mean(rx if phase["direction"] == "h2d" else tx) if (rx and tx) else None
        away = statistics.mean(tx if phase["direction"] == "h2d" else rx) if (rx and tx) else None
        name = "rx" if phase["direction"] == "h2d" else "tx"
        if toward is None:
            kit.add(f"PCIe {name} during {phase['direction']} load", "-", f"{phase['gbps']:.1f} GB/s", "FAIL")
            continue
        ratio = toward / phase["gbps"] if phase["gbps"] else 0.0
        low, high = COUNTER_RATIO_BAND
        kit.add(f"PCIe {name} GB/s during {phase['direction']} load",
                f"{toward:.1f} over {len(inside)} readings (other direction {away:.1f})",
                f"{phase['gbps']:.1f} GB/s moved by the load (ratio {ratio:.2f})",
                "pass" if low <= ratio <= high else "FAIL")


def _unix(iso: str | None) -> float | None:
    if not iso:
        return None
    from datetime import datetime

    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return None


def step_trace(kit: Kit) -> None:
    traces = kit.raw / "trace"
    # NCCL's own view of this machine, as a user would ask for it: its debug log (in ddp-step.err), the
    # topology it built and the graphs it searched
    nccl = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,GRAPH,ENV,TUNING",
            "NCCL_TOPO_DUMP_FILE": str(kit.raw / "nccl-topo-dump.xml"),
            "NCCL_GRAPH_DUMP_FILE": str(kit.raw / "nccl-graph-dump.xml")}
    made = kit.kit_script("ddp-step", "ddp_step.py", ["--out", str(traces), "--steps", "8"], 150, env=nccl)
    counted = _json(made) or {}
    if not _exit_row(kit, f"profiled DDP step ({counted.get('backend', '?')}, world size 1)", made):
        return
    ran = kit.linkscope("trace", ["trace", str(traces), "--json"], 90)
    _exit_row(kit, "linkscope trace", ran, (0, 1))
    judge_trace(kit, counted, _json(ran) or {})


def judge_trace(kit: Kit, counted: dict[str, Any], data: dict[str, Any]) -> None:
    """Rows for `linkscope trace --json` against ddp_step.py's own count of the trace."""
    steps = {row.get("step") for row in data.get("steps", [])}
    kit.compare("profiler steps read", len(steps), counted.get("profiler_steps"))
    calls = data.get("collectives", [])
    gpu_timed = [row for row in calls if row.get("timed_on") == "gpu"]
    kit.add("collective calls read (timed on the GPU)", f"{len(calls)} ({len(gpu_timed)})",
            f"{counted.get('collective_cpu_ops')} nccl:/gloo: CPU ops, {counted.get('nccl_kernels')} NCCL kernels, "
            f"{counted.get('gpu_kernels')} GPU kernels in the trace",
            "pass" if len(calls) == counted.get("collective_cpu_ops") and len(gpu_timed) <= (counted.get("nccl_kernels") or 0)
            else "FAIL")
    if counted.get("nccl_kernels") == 0 and counted.get("backend") == "nccl":
        kit.notes.append("trace: NCCL launched no kernel at world size 1 (nothing to move between GPUs)")
    shares = [row.get("exposed_share") for row in data.get("steps", []) if row.get("exposed_share") is not None]
    kit.add("exposed communication share per step", ", ".join(f"{share:.3f}" for share in shares[:4]) or "-", "-",
            "info")


def step_gpu_tests(kit: Kit) -> None:
    # run outside the repository: its linkscope/ folder (topo, probes and tui are mapped in only by an install)
    # would otherwise come first on the path, before the linkscope installed into kit.site
    tests = [str(kit.repo / "tests" / "probes" / "bench" / "test_p2p.py"), str(kit.repo / "tests" / "probes" / "test_gpu.py")]
    ran = kit.command("pytest-gpu", [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider",
                                     "-c", str(kit.repo / "pyproject.toml"), "--rootdir", str(kit.repo), *tests], 150,
                      env={"PYTHONPATH": str(kit.site or kit.repo)}, cwd=kit.work)
    last = (ran.out.strip().splitlines() or ["(no output)"])[-1]
    kit.add("pytest -m gpu (the suite's GPU tests)", last[:120], "-", "pass" if ran.code == 0 else "FAIL")


STEPS: tuple[Step, ...] = (
    Step("environment", step_environment),
    Step("install", step_install),
    Step("driver", step_driver, "nvidia-smi"),
    Step("probe", step_probe),
    Step("show-doctor", step_show_doctor),
    Step("bench-copies", step_bench_copies, "gpu"),
    Step("bench-collectives", step_bench_collectives, "torch"),
    Step("record", step_record, "gpu"),
    Step("trace", step_trace, "torch"),
    Step("gpu-tests", step_gpu_tests, "gpu"),
)
