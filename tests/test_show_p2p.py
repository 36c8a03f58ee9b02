"""`show` says which pairs cannot copy peer to peer, as `nvidia-smi topo -p2p` reported them."""

from __future__ import annotations

from pathlib import Path

import pytest

from linkscope.cli import main

TOPO = Path(__file__).parent / "fixtures" / "real" / "topo"


@pytest.mark.parametrize("source, said", [(str(TOPO / "rtx2080ti-2gpu-pix-p2p-not-supported.txt"), True),
                                          ("sample:consumer-2gpu", True), ("sample:dgx-h100", False)])
def test_pairs_without_p2p_are_named(source: str, said: bool, capsys: pytest.CaptureFixture[str]) -> None:
    main(["show", source])
    out = " ".join(capsys.readouterr().out.split())
    assert ("P2P not supported (NS in `nvidia-smi topo -p2p`): GPU0-GPU1" in out) == said
    assert ("staged through host memory" in out) == said
