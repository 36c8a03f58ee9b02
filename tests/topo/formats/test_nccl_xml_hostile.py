"""Hostile XML is refused in one line, quickly and without growing memory: entity expansion (billion laughs),
external entities, deep nesting, huge attributes, too many elements; and any text reads or is one InputError."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkscope.topo.common.errors import InputError
from linkscope.topo.common.limits import MAX_NCCL_XML_BYTES, MAX_XML_ELEMENTS
from linkscope.topo.formats.nccl_graph import read_nccl_graph_xml
from linkscope.topo.formats.nccl_topo_xml import read_nccl_topo_xml
from linkscope.topo.formats.source import parse_source_text

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<system version="1"><cpu numaid="&lol9;"/></system>
"""

EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE system [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<system version="1"><cpu numaid="0" affinity="&secret;"/></system>
"""

EXTERNAL_DTD = '<?xml version="1.0"?>\n<!DOCTYPE system SYSTEM "http://example.invalid/nccl.dtd">\n<system version="1"/>\n'

HOSTILE = {
    "billion laughs": BILLION_LAUGHS,
    "external entity": EXTERNAL_ENTITY,
    "external DTD": EXTERNAL_DTD,
    "10^6 nested elements": "<system version=\"1\">" + "<pci>" * 1_000_000 + "</pci>" * 1_000_000 + "</system>",
    "huge attribute": '<system version="1"><cpu numaid="0" affinity="' + "f" * 1_000_000 + '"/></system>',
    "too many elements": '<system version="1"><cpu numaid="0">' + "<nic/>" * (MAX_XML_ELEMENTS + 1) + "</cpu></system>",
    "larger than the cap": "<system>" + " " * (MAX_NCCL_XML_BYTES + 1) + "</system>",
    "a million comment openings": '<system version="1">' + "<!--" * 1_000_000,
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
@pytest.mark.parametrize("reader", [read_nccl_topo_xml, read_nccl_graph_xml, parse_source_text])
def test_hostile_xml_is_refused_in_one_line(case: str, reader: object) -> None:
    started = time.perf_counter()
    with pytest.raises(InputError) as refused:
        reader(HOSTILE[case], "hostile.xml")  # type: ignore[operator]
    message = str(refused.value)
    assert "\n" not in message and message.startswith("hostile.xml: ")
    assert time.perf_counter() - started < 30.0  # a bound against blow-ups (10^9 expansions), not a benchmark
    assert "root" not in message and "passwd" not in message  # nothing of an external file leaks into the message


def _refusal(text: str) -> str:
    try:
        read_nccl_topo_xml(text, "h.xml")
    except InputError as refused:
        return str(refused)
    raise AssertionError("read")


def test_refusals_say_why() -> None:
    reasons = {case: _refusal(HOSTILE[case]) for case in HOSTILE}
    assert "DOCTYPE" in reasons["billion laughs"] and "DOCTYPE" in reasons["external entity"]
    assert "nested more than" in reasons["10^6 nested elements"] and "line 1" in reasons["10^6 nested elements"]
    assert "longer than" in reasons["huge attribute"]
    assert "more than" in reasons["too many elements"] and "MiB" in reasons["larger than the cap"]


@pytest.mark.parametrize(("text", "says"), [
    ('<system version="2"><cpu numaid="0"/></system>', "version"),
    ("<graphs version=\"1\"/>", "not NCCL's topology"),
    ('<system version="1"></system>', "no <cpu>"),
    ('<system version="1">\n<cpu numaid="0">\n<pci busid="0"></cpu></system>', "line 3"),
    ('<system version="1"><cpu numaid="0"/></system><system/>', "not well-formed"),
])
def test_malformed_topology_is_one_line_naming_the_line(text: str, says: str) -> None:
    with pytest.raises(InputError, match=says) as refused:
        read_nccl_topo_xml(text, "bad.xml")
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("value", ["1e400", "nan", "-1e999", "9" * 5000, "0x" + "f" * 40, "١٢", "-0x1", " 7 "])
def test_any_number_in_any_attribute_reads_or_is_one_line(value: str) -> None:
    text = (f'<system version="1"><cpu numaid="{value}" affinity="{value}"><pci busid="0000:01:00.0" class="0x030200" '
            f'link_speed="{value}" link_width="{value}"><gpu dev="{value}" sm="{value}" rank="{value}" gdr="{value}">'
            f'<nvlink target="x" count="{value}"/></gpu></pci><nic><net name="n" dev="{value}" speed="{value}" '
            f'port="{value}"/></nic></cpu></system>')
    graph = (f'<graphs version="1"><graph id="{value}" pattern="{value}" nchannels="{value}" speedintra="{value}">'
             f'<channel><gpu dev="{value}"/><net dev="{value}"/></channel></graph></graphs>')
    for reader, xml in ((parse_source_text, text), (read_nccl_graph_xml, graph)):
        try:
            reader(xml, "n.xml")
        except InputError as error:
            assert "\n" not in str(error)


def test_comments_are_dropped_the_way_nccl_drops_them() -> None:
    """NCCL's reader ends a comment at the first `-->`, so `--` inside one is fine in a hand-written file."""
    text = '<!-- vendor file -- do not edit -->\n<system version="1">\n<!-- a -- b -->\n<cpu numaid="0"/>\n</system>\n'
    topology = read_nccl_topo_xml(text, "c.xml")
    assert topology.cpus[0].numa_id == 0


_PIECES = ['<system version="1">', "</system>", '<cpu numaid="0" affinity="ff">', "</cpu>", '<pci busid="0000:01:00.0" '
           'class="0x030200" link_speed="" link_width="0">', "</pci>", '<gpu dev="0x1" sm="90" rank="0" gdr="1">', "</gpu>",
           '<nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/>', "<nic>", "</nic>",
           '<net name="mlx5_0" dev="0" speed="400000" gdr="1"/>', '<graphs version="1">', "</graphs>",
           '<graph id="0" pattern="4" nchannels="1" speedintra="20" typeintra="NVL">', "</graph>", "<channel>",
           "</channel>", '<net dev="0"/>', "<!-- x -- y -->", "<!DOCTYPE x>", "&amp;", "&x;", "<", ">", '"']


@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=12)), max_size=30),
       reader=st.sampled_from([read_nccl_topo_xml, read_nccl_graph_xml, parse_source_text]))
def test_any_xml_like_text_reads_or_is_one_input_error(pieces: list[str], reader: object) -> None:
    try:
        reader("".join(pieces), "fuzz.xml")  # type: ignore[operator]
    except InputError as error:
        assert "\n" not in str(error)
