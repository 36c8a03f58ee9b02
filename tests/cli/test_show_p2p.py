"""`show` says which pairs cannot copy peer to peer, as `nvidia-smi topo -p2p` reported them."""

from __future__ import annotations

from pathlib import Path

import pytest

from linkscope.cli import main
from support.paths import FIXTURES

TOPO = FIXTURES / "real" / "topo"


@pytest.mark.parametrize("source, said", [(str(TOPO / "rtx2080ti-2gpu-pix-p2p-not-supported.txt"), True),
                                          ("sample:consumer-2gpu", True), ("sample:dgx-h100", False)])
def test_pairs_without_p2p_are_named(source: str, said: bool, capsys: pytest.CaptureFixture[str]) -> None:
    main(["show", source])
    out = " ".join(capsys.readouterr().out.split())
    assert ("P2P not supported (NS in `nvidia-smi topo -p2p`): GPU0-GPU1" in out) == said
    assert ("staged through host memory" in out) == said


def test_a_topology_text_cut_inside_a_token_says_it_is_cut(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (TOPO / "h100-8gpu-nv18-13nic-named-ib-eth.txt").read_text()
    row = text.index("\nGPU3 ") + 1
    cut = tmp_path / "cut.txt"
    cut.write_text(text[: row + len("GPU3    NV18    N")])
    assert main(["show", str(cut)]) == 2
    err = capsys.readouterr().err
    assert "unknown link token 'N'" in err and "it looks cut short" in err
